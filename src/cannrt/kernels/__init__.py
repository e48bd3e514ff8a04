"""Kernel binaries: numpy implementations, tiling over blockDim and cost models."""

from __future__ import annotations

from cannrt.abi import Work
from cannrt.kernels import builtins as _builtins  # noqa: F401  (registers the built-ins)
from cannrt.kernels import nn as _nn  # noqa: F401  (registers the operator kernels)
from cannrt.kernels.registry import (
    Kernel,
    KernelArgumentError,
    get_kernel,
    kernel_names,
    register_kernel,
)

__all__ = ["Kernel", "KernelArgumentError", "Work", "get_kernel", "kernel_names", "register_kernel"]
