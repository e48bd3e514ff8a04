"""One frozen settings object: chip spec, capacities and modelled costs.

Loaded from presets, a TOML file (CANNRT_CONFIG) and environment variables (CANNRT_CHIP,
CANNRT_DEVICE_COUNT, CANNRT_HBM_GIB); passed down explicitly, never read deep inside.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10


@dataclass(frozen=True)
class ChipSpec:
    """Figures of one Ascend-class chip (REFERENCE.md section 1)."""

    name: str = "Ascend910B1"
    aicore_count: int = 24  # cube cores
    vector_core_count: int = 48
    aicpu_count: int = 6
    clock_mhz: float = 1850.0
    hbm_bytes: int = 64 * GIB
    hbm_bandwidth_gbps: float = 1600.0  # GB/s, a guess: public figures vary (0.77-1.6 TB/s)
    hbm_efficiency: float = 0.8  # sustained fraction of HBM bandwidth (streams reach ~1.25 TB/s)
    l2_bytes: int = 192 * MIB
    l2_bandwidth_gbps: float = 4000.0  # GB/s aggregate, a guess
    ub_bytes: int = 192 * KIB
    cube_macs_per_cycle: int = 16 * 16 * 16  # fp16 m/n/k tile per cycle per core
    vector_ops_per_cycle: int = 128  # fp32 lanes per vector core per cycle
    core_gm_read_gbps: float = 220.0  # per-core GM->UB cap
    core_l1_read_gbps: float = 264.0  # per-core GM->L1 cap (MTE2)
    core_gm_write_gbps: float = 186.8  # per-core UB->GM cap
    sdma_engines: int = 4
    pcie_bandwidth_gbps: float = 24.0  # host <-> device copies
    peer_bandwidth_gbps: float = 56.0  # device <-> device (HCCS), a guess
    disabled_cores: tuple[int, ...] = ()  # physical AI core ids fused off
    max_streams: int = 32768
    max_events: int = 65535
    sq_depth: int = 1024

    def enabled_cores(self) -> tuple[int, ...]:
        """Physical AI core ids in logical order (disabled ones skipped)."""
        return tuple(i for i in range(self.aicore_count) if i not in self.disabled_cores)

    def vector_cores_per_core(self) -> int:
        """Vector cores that come with each AI core."""
        return max(1, self.vector_core_count // max(1, self.aicore_count))

    def usable_cores(self, vector: bool) -> int:
        """Enabled cores of one kind: AI cores, or the vector cores beside the enabled AI cores."""
        return len(self.enabled_cores()) * (self.vector_cores_per_core() if vector else 1)


PRESETS: dict[str, ChipSpec] = {
    "Ascend910B1": ChipSpec(),
    "Ascend910B4": ChipSpec(
        name="Ascend910B4",
        aicore_count=20,
        vector_core_count=40,
        clock_mhz=1650.0,
        hbm_bytes=32 * GIB,
        l2_bytes=96 * MIB,
        core_gm_read_gbps=195.0,
    ),
}


@dataclass(frozen=True)
class DeviceCosts:
    """Fixed device-side costs in nanoseconds (task scheduler and engines)."""

    dispatch_ns: int = 300  # task scheduler: fetch, decode, dispatch one task
    kernel_floor_ns: int = 1200  # smallest kernel (block launch + tail), REFERENCE 13
    block_launch_ns: int = 150  # per extra wave of blocks on one core
    event_ns: int = 100  # event record / wait / write value
    copy_latency_ns: int = 1500  # SDMA setup
    callback_ns: int = 5000  # device -> host report -> host function -> back


@dataclass(frozen=True)
class HostCosts:
    """Modelled cost of host API calls in nanoseconds (advances the host clock)."""

    launch_ns: int = 3000
    memcpy_async_ns: int = 2500
    event_ns: int = 1000
    stream_ns: int = 5000
    malloc_ns: int = 8000
    sync_ns: int = 2000
    call_ns: int = 200  # any other API call


@dataclass(frozen=True)
class Settings:
    """Everything configurable about the simulated machine."""

    chip: ChipSpec = field(default_factory=ChipSpec)
    device_count: int = 2
    device_costs: DeviceCosts = field(default_factory=DeviceCosts)
    host_costs: HostCosts = field(default_factory=HostCosts)
    watchdog_s: float = 60.0  # wall-clock limit on any real wait (turns a hang into an error)

    def with_chip(self, name: str) -> Settings:
        """The same settings on another chip preset."""
        return dataclasses.replace(self, chip=chip_preset(name))


def chip_preset(name: str) -> ChipSpec:
    """The chip spec of a named preset (Ascend910B1, Ascend910B4)."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown chip preset {name!r}; known: {known}") from None


def _merge(obj: Any, values: dict[str, Any]) -> Any:
    """A copy of a frozen dataclass with fields replaced from a (nested) dict."""
    updates: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in values.items():
        if key not in names:
            raise ValueError(f"unknown setting {key!r} for {type(obj).__name__}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current) and isinstance(value, dict):
            value = _merge(current, value)
        elif isinstance(current, tuple):
            value = tuple(value)
        updates[key] = value
    return dataclasses.replace(obj, **updates)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Settings from defaults, then a TOML file, then environment variables."""
    settings = Settings()
    path = path or os.environ.get("CANNRT_CONFIG")
    data = tomllib.loads(Path(path).read_text()) if path else {}
    preset = data.get("chip", {}).pop("preset", None) if isinstance(data.get("chip"), dict) else None
    preset = os.environ.get("CANNRT_CHIP", preset)  # the preset first, the file's chip fields on top
    if preset:
        settings = settings.with_chip(preset)
    settings = _merge(settings, data) if data else settings
    if "CANNRT_DEVICE_COUNT" in os.environ:
        settings = dataclasses.replace(settings, device_count=int(os.environ["CANNRT_DEVICE_COUNT"]))
    if "CANNRT_HBM_GIB" in os.environ:
        chip = dataclasses.replace(settings.chip, hbm_bytes=int(os.environ["CANNRT_HBM_GIB"]) * GIB)
        settings = dataclasses.replace(settings, chip=chip)
    return settings
