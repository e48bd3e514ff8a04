"""`cannrt.dump(...)`: write kernels' tensors to disk while a block runs (the acl.json "dump" config).

    with cannrt.dump("dumps", ops={"fc1", "fc2"}, mode="all"):
        stream.launch("matmul", x, w, y, name="fc1")

On exit every device is synchronised and one file per dumped kernel is written under
`dumps/{device}/` with CANN's names; failing kernels are dumped too (exception dump).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.core import DumpConfig, Runtime, get_runtime
from cannrt.tools.dump import DumpWriter

MODES = {"input": (True, False), "output": (False, True), "all": (True, True)}


@dataclass
class DumpResult:
    """The files a dump block wrote."""

    path: Path
    files: list[Path] = field(default_factory=list)


@contextmanager
def dump(
    path: str | Path,
    ops: Iterable[str] | None = None,
    mode: str = "all",
    data: str = "tensor",
    exception: bool = True,
    runtime: Runtime | None = None,
) -> Iterator[DumpResult]:
    """Dump the tensors of kernels launched in the block (dump_list=ops, dump_mode, dump_data)."""
    runtime = runtime or get_runtime()
    if mode not in MODES or data not in ("tensor", "stats"):
        raise CannError(
            ErrorCode.INVALID_PARAM, f"dump mode {mode!r} / data {data!r}: use input|output|all, tensor|stats"
        )
    if runtime.dump_config is not None:
        raise CannError(ErrorCode.DUMP_ALREADY_RUN, "a dump is already running")
    inputs, outputs = MODES[mode]
    config = DumpConfig(
        str(path), frozenset(ops) if ops is not None else None, inputs, outputs, data == "stats", exception
    )
    result = DumpResult(Path(path))
    _configure(runtime, config)
    try:
        yield result
    finally:
        try:
            for device_id in list(runtime.devices):
                runtime.synchronize_device(device_id)
        finally:
            result.files = _collect(runtime, config)
            runtime.dump_config = None
            for device_id in list(runtime.devices):
                runtime.driver.dump_configure(device_id, False, False, False)


def _configure(runtime: Runtime, config: DumpConfig) -> None:
    runtime.dump_config = config
    for device_id in list(runtime.devices):
        runtime.driver.dump_configure(device_id, config.inputs, config.outputs, config.exception)


def _collect(runtime: Runtime, config: DumpConfig) -> list[Path]:
    writer = DumpWriter(config.path, config.stats_only)
    for device_id in list(runtime.devices):
        for record in runtime.driver.dump_read(device_id):
            name = config.op_names.pop((record.device_id, record.stream_id, record.task_id), record.kernel_name)
            writer.write(record, name)
    return writer.written
