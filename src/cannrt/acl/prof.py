"""acl.prof: the profiling calls (aclprofInit, aclprofCreateConfig, aclprofStart/Stop, aclprofFinalize).

start() traces every task of the listed devices; stop() writes what ran, msprof style, into
`<path>/PROF_<n>/mindstudio_profiler_output/`: `task_time_<ts>.csv` and a Chrome trace
`msprof_<ts>.json` (one track per stream). It is a small stand-in for the full profiler.
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._state import api, as_handle, as_int, as_int_list, as_str, fail, on_finalize, record_error, runtime
from cannrt.errors import ErrorCode

AICORE_METRICS = (0, 1, 2, 3, 4, 5, c.ACL_AICORE_NONE)


@dataclass
class ProfConfig:
    """aclprofConfig: devices and what to collect."""

    devices: tuple[int, ...]
    aicore_metrics: int
    data_types: int


@dataclass
class _Session:
    path: Path | None = None
    running: ProfConfig | None = None
    runs: int = 0


_configs: HandleTable[ProfConfig] = HandleTable(Kind.PROF_CONFIG)
_session = _Session()


@on_finalize
def _reset() -> None:
    _configs.clear()
    _session.path, _session.running, _session.runs = None, None, 0


@api()
def init(profiler_result_path: str) -> None:
    """Choose the output directory (created if missing) (aclprofInit)."""
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
    """A profiling configuration, 0 if invalid (aclprofCreateConfig)."""
    devices, metrics = as_int_list("device_id_list", device_id_list), as_int("aicore_metrics", aicore_metrics)
    data_types = as_int("data_type_config", data_type_config)
    if not devices or metrics not in AICORE_METRICS or data_types < 0:
        record_error(ErrorCode.INVALID_PARAM, f"create_config: devices {devices}, metrics {metrics}")
        return 0
    return _configs.add(ProfConfig(tuple(devices), metrics, data_types))


@api()
def destroy_config(config: int) -> None:
    """Destroy a configuration (aclprofDestroyConfig)."""
    if _configs.remove(as_handle("config", config)) is None:
        raise fail(ErrorCode.INVALID_PARAM, f"{config!r} is not a profiling configuration")


def _config_of(config: object) -> ProfConfig:
    found = _configs.get(as_handle("config", config))
    if found is None:
        raise fail(ErrorCode.INVALID_PARAM, f"{config!r} is not a profiling configuration")
    return found


@api()
def start(config: int) -> None:
    """Start tracing the configured devices (aclprofStart); each must have been set."""
    settings = _config_of(config)
    rt = runtime()
    if _session.path is None:
        raise fail(ErrorCode.UNINITIALIZE, "acl.prof.init has not been called")
    if _session.running is not None:
        raise fail(ErrorCode.PROF_ALREADY_RUN, "profiling is already running")
    for device in settings.devices:
        rt.device_state(device)  # the device must be open
        rt.driver.trace_start(device)
    _session.running = settings


@api()
def stop(config: int) -> None:
    """Stop tracing and write the results (aclprofStop)."""
    settings = _config_of(config)
    runtime()
    if _session.running is None or _session.path is None:
        raise fail(c.ACL_ERROR_PROF_NOT_RUN, "profiling is not running")
    records = [r for device in settings.devices for r in runtime().driver.trace_stop(device)]
    _session.running = None
    _session.runs += 1
    _write(_session.path / f"PROF_{os.getpid()}_{_session.runs:03d}" / "mindstudio_profiler_output", records)


@api()
def finalize() -> None:
    """End profiling (aclprofFinalize)."""
    runtime()
    if _session.path is None:
        raise fail(ErrorCode.UNINITIALIZE, "acl.prof.init has not been called")
    if _session.running is not None:
        raise fail(ErrorCode.PROF_ALREADY_RUN, "call acl.prof.stop first")
    _session.path = None


def _write(folder: Path, records: list[Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d%H%M%S")
    with open(folder / f"task_time_{stamp}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "Device_id",
                "kernel_name",
                "kernel_type",
                "stream_id",
                "task_id",
                "task_time(us)",
                "task_start(us)",
                "task_stop(us)",
            ]
        )
        for r in records:
            writer.writerow(
                [
                    r.device_id,
                    r.name,
                    r.sqe_type,
                    r.stream_id,
                    r.task_id,
                    (r.end_ns - r.start_ns) / 1000,
                    r.start_ns / 1000,
                    r.end_ns / 1000,
                ]
            )
    events: list[dict[str, Any]] = [
        {
            "name": r.name,
            "ph": "X",
            "pid": r.device_id,
            "tid": r.stream_id,
            "ts": r.start_ns / 1000,
            "dur": (r.end_ns - r.start_ns) / 1000,
            "args": {"task_id": r.task_id, "block_dim": r.block_dim},
        }
        for r in records
    ]
    events += [
        {"name": "thread_name", "ph": "M", "pid": d, "tid": s, "args": {"name": f"Stream {s}"}}
        for d, s in sorted({(r.device_id, r.stream_id) for r in records})
    ]
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    (folder / f"msprof_{stamp}.json").write_text(json.dumps(trace), encoding="utf-8")


__all__ = [
    "create_config",
    "destroy_config",
    "finalize",
    "init",
    "start",
    "stop",
]
