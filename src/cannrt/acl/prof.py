"""acl.prof: the profiling calls (aclprofInit, aclprofCreateConfig, aclprofStart/Stop, aclprofFinalize).

start() opens a `cannrt.api.profile.profile()` region on the configured devices; stop() closes it,
which writes the msprof folder `<path>/PROF_<id>_<ts>/mindstudio_profiler_output/` (Chrome trace,
op_summary, task_time, l2_cache and api_statistic; see docs/profiling.md).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._state import (
    api,
    as_handle,
    as_int,
    as_int_list,
    as_str,
    fail,
    on_finalize,
    record_error,
    require,
    runtime,
)
from cannrt.api.profile import Profile, profile
from cannrt.errors import ErrorCode

METRIC_GROUPS = {  # aclprofAicoreMetrics -> profiler PMU group (others fall back to PipeUtilization)
    c.ACL_AICORE_ARITHMETIC_UTILIZATION: "ArithmeticUtilization",
    c.ACL_AICORE_PIPE_UTILIZATION: "PipeUtilization",
    c.ACL_AICORE_MEMORY_BANDWIDTH: "Memory",
    c.ACL_AICORE_L0B_AND_WIDTH: "PipeUtilization",
    c.ACL_AICORE_RESOURCE_CONFLICT_RATIO: "PipeUtilization",
    c.ACL_AICORE_MEMORY_UB: "PipeUtilization",
    c.ACL_AICORE_L2_CACHE: "L2Cache",
    c.ACL_AICORE_NONE: "PipeUtilization",
}


@dataclass(frozen=True)
class ProfConfig:
    """aclprofConfig: devices and what to collect."""

    devices: tuple[int, ...]
    aicore_metrics: int
    data_types: int


@dataclass
class _Session:
    path: Path | None = None
    region: AbstractContextManager[Profile] | None = None  # the open profile() while running


_configs: HandleTable[ProfConfig] = HandleTable(Kind.PROF_CONFIG)
_session = _Session()


@on_finalize
def _reset() -> None:
    if _session.region is not None:
        _session.region.__exit__(None, None, None)
    _configs.clear()
    _session.path, _session.region = None, None


@api()
def init(profiler_result_path: str) -> None:
    """Choose the output directory, created if missing (aclprofInit)."""
    path = Path(as_str("profiler_result_path", profiler_result_path))
    runtime()
    if _session.path is not None:
        raise fail(ErrorCode.REPEAT_INITIALIZE, "acl.prof.init was already called")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(c.ACL_ERROR_INVALID_FILE, f"cannot use {path}: {exc}") from None
    _session.path = path


def create_config(device_id_list: list[int], aicore_metrics: int, aicore_events: Any, data_type_config: int) -> int:
    """A profiling configuration, 0 if invalid (aclprofCreateConfig); aicore_events is ignored."""
    devices, metrics = as_int_list("device_id_list", device_id_list), as_int("aicore_metrics", aicore_metrics)
    data_types = as_int("data_type_config", data_type_config)
    if not devices or metrics not in METRIC_GROUPS or data_types < 0:
        record_error(ErrorCode.INVALID_PARAM, f"create_config: devices {devices}, aicore_metrics {metrics}")
        return 0
    return _configs.add(ProfConfig(tuple(devices), metrics, data_types))


@api()
def destroy_config(config: int) -> None:
    """Destroy a configuration (aclprofDestroyConfig)."""
    if _configs.remove(as_handle("config", config)) is None:
        raise fail(ErrorCode.INVALID_PARAM, f"{config!r} is not a profiling configuration")


def _config_of(config: object) -> ProfConfig:
    return require(_configs, "config", config, "a profiling configuration")


@api()
def start(config: int) -> None:
    """Start profiling the configured devices, which must have been set (aclprofStart)."""
    settings = _config_of(config)
    rt = runtime()
    if _session.path is None:
        raise fail(ErrorCode.UNINITIALIZE, "acl.prof.init has not been called")
    if _session.region is not None:
        raise fail(ErrorCode.PROF_ALREADY_RUN, "profiling is already running")
    for device in settings.devices:
        rt.device_state(device)  # CONTEXT_NULL unless the device was set
    region = profile(_session.path, METRIC_GROUPS[settings.aicore_metrics], list(settings.devices))
    region.__enter__()
    _session.region = region


@api()
def stop(config: int) -> None:
    """Stop profiling and write the msprof folder (aclprofStop); synchronize first to include every task."""
    _config_of(config)
    runtime()
    region = _session.region
    if region is None:
        raise fail(c.ACL_ERROR_PROF_NOT_RUN, "profiling is not running")
    _session.region = None
    region.__exit__(None, None, None)


@api()
def finalize() -> None:
    """End profiling (aclprofFinalize)."""
    runtime()
    if _session.path is None:
        raise fail(ErrorCode.UNINITIALIZE, "acl.prof.init has not been called")
    if _session.region is not None:
        raise fail(ErrorCode.PROF_ALREADY_RUN, "call acl.prof.stop first")
    _session.path = None


__all__ = [
    "create_config",
    "destroy_config",
    "finalize",
    "init",
    "start",
    "stop",
]
