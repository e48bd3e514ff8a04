"""`cannrt.dump(...)`: write kernels' tensors to disk while a block runs (the acl.json "dump" config).

    with cannrt.dump("dumps", ops={"fc1", "fc2"}, mode="all"):
        stream.launch("matmul", x, w, y, name="fc1")

On exit every device is synchronised and one file per dumped kernel is written under
`dumps/{device}/` with CANN's names; failing kernels are dumped too (exception dump). pyACL
programs get the same from the "dump" section of the acl.json given to acl.init.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.core import DumpConfig, Runtime, get_runtime
from cannrt.tools.dump import DumpWriter

MODES = {"input": (True, False), "output": (False, True), "all": (True, True), "overflow": (False, False)}


@dataclass
class SessionConfig(DumpConfig):
    """A dump configuration with the overflow switch (dump_mode "overflow" / acl.json dump_debug)."""

    overflow: bool = False  # overflow detection on: a kernel raising a float exception fails and is dumped


@dataclass
class DumpResult:
    """The files a dump block wrote."""

    path: Path
    files: list[Path] = field(default_factory=list)


class DumpSession:
    """A dump configuration installed on a runtime; flush() writes what completed so far."""

    def __init__(self, runtime: Runtime, config: DumpConfig) -> None:
        if runtime.dump_config is not None:
            raise CannError(ErrorCode.DUMP_ALREADY_RUN, "a dump is already running")
        self.runtime = runtime
        self.config = config
        self.writer = DumpWriter(config.path, config.stats_only)
        runtime.dump_config = config
        self.overflow = bool(getattr(config, "overflow", False))
        for device_id in list(runtime.devices):
            runtime.driver.dump_configure(device_id, config.inputs, config.outputs, config.exception)
            runtime.driver.overflow_configure(device_id, self.overflow, self.overflow)

    def flush(self) -> list[Path]:
        """Write the dump records of every task completed by now."""
        written: list[Path] = []
        for device_id in list(self.runtime.devices):
            for record in self.runtime.driver.dump_read(device_id, self.runtime.host_time_ns):
                key = (record.device_id, record.stream_id, record.task_id)
                written.append(self.writer.write(record, self.config.op_names.pop(key, record.kernel_name)))
        if written:
            self.writer.write_manifests()
        return written

    def stop(self) -> list[Path]:
        """Flush and uninstall."""
        written = self.flush()
        self.runtime.dump_config = None
        for device_id in list(self.runtime.devices):
            self.runtime.driver.dump_configure(device_id, False, False, True)  # exception dumps stay on
            self.runtime.driver.overflow_configure(device_id, False, False)
        return written


def config_of(
    path: str | Path, ops: Iterable[str] | None = None, mode: str = "all", data: str = "tensor", exception: bool = True
) -> SessionConfig:
    """A validated dump configuration (dump_path, dump_list, dump_mode, dump_data); mode
    "overflow" turns overflow detection on and dumps only the kernels that overflow."""
    if mode not in MODES or data not in ("tensor", "stats"):
        message = f"dump mode {mode!r} / data {data!r}: use input|output|all|overflow and tensor|stats"
        raise CannError(ErrorCode.INVALID_PARAM, message)
    inputs, outputs = MODES[mode]
    selected = frozenset(ops) if ops is not None else None
    overflow = mode == "overflow"
    return SessionConfig(str(path), selected, inputs, outputs, data == "stats", exception, overflow=overflow)


def config_from_acl_json(section: Mapping[str, Any]) -> SessionConfig:
    """The acl.json "dump" section: dump_path, dump_mode, dump_data, dump_op_switch ("on" dumps
    every op), dump_list [{"layer": [op names]}], dump_scene ("lite_exception": failures only)."""
    if not isinstance(section.get("dump_path"), str) or not section["dump_path"]:
        raise CannError(ErrorCode.INVALID_PARAM, "acl.json dump section needs a dump_path")
    layers = [name for entry in section.get("dump_list", []) or [] for name in entry.get("layer", []) or []]
    everything = str(section.get("dump_op_switch", "off")).lower() == "on"
    ops: frozenset[str] | None = None if everything else frozenset(layers)
    config = config_of(section["dump_path"], ops, str(section.get("dump_mode", "output")),
                       str(section.get("dump_data", "tensor")))  # fmt: skip
    if section.get("dump_scene") == "lite_exception":
        config.ops = frozenset()
    if str(section.get("dump_debug", "off")).lower() == "on":  # CANN's overflow detection switch
        config.overflow = True
    return config


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
    session = DumpSession(runtime, config_of(path, ops, mode, data, exception))
    result = DumpResult(Path(path))
    try:
        yield result
    finally:
        try:
            for device_id in list(runtime.devices):
                runtime.synchronize_device(device_id)
        finally:
            result.files = session.stop()
