"""The Pythonic API over the runtime; errors raise CannError.

- device.py: Device (one NPU and its default context), device_count
- stream.py: Stream (an in-order task queue); current.py: the thread's current stream per device
- event.py: Event (record / wait, device timestamps)
- array.py: DeviceArray (typed device memory, to and from numpy)
- pools.py: the caching pool behind Device.empty and DeviceArray.free (one per context)
- graph_memory.py: GraphMemory, typed views into a planned static pool (Device.static_pool)
- profile.py: profile() and Profile, msprof-style profiling of a region (cannrt.profile)
- model.py: Model, an offline model loaded on a device and called with numpy arrays
- dump.py: dump(), the kernels' tensors written while a block runs (cannrt.dump)

The functions profile() and dump() are exported by the root package (cannrt.profile, cannrt.dump),
not here, so that cannrt.api.profile and cannrt.api.dump stay the modules.
"""

from __future__ import annotations

from cannrt.api.array import DeviceArray
from cannrt.api.current import active_stream, current_stream
from cannrt.api.device import Device, device_count
from cannrt.api.event import Event
from cannrt.api.graph_memory import GraphMemory
from cannrt.api.model import Model
from cannrt.api.profile import Profile
from cannrt.api.stream import Stream

__all__ = [
    "Device",
    "DeviceArray",
    "Event",
    "GraphMemory",
    "Model",
    "Profile",
    "Stream",
    "active_stream",
    "current_stream",
    "device_count",
]
