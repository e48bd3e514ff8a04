"""cannrt: the CANN runtime in Python, on a simulated Ascend-class NPU."""

from __future__ import annotations

from cannrt.api import Device, DeviceArray, Event, Model, Profile, Stream, current_stream, device_count
from cannrt.api.dump import dump
from cannrt.api.profile import profile
from cannrt.config import ChipSpec, Settings, chip_preset, load_settings
from cannrt.errors import CannError, CannTimeout, ErrorCode, OutOfMemoryError
from cannrt.kernels import Kernel, KernelArgumentError, Work, kernel_names, register_kernel
from cannrt.memory.lifetimes import Topology
from cannrt.runtime.core import get_runtime, reset_runtime

__version__ = "0.1.0"

__all__ = [
    "CannError",
    "CannTimeout",
    "ChipSpec",
    "Device",
    "DeviceArray",
    "ErrorCode",
    "Event",
    "Kernel",
    "KernelArgumentError",
    "Model",
    "OutOfMemoryError",
    "Profile",
    "Settings",
    "Stream",
    "Topology",
    "Work",
    "__version__",
    "chip_preset",
    "current_stream",
    "device_count",
    "dump",
    "get_runtime",
    "kernel_names",
    "load_settings",
    "profile",
    "register_kernel",
    "reset_runtime",
]
