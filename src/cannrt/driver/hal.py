"""The driver: the only door between the runtime and the device (models the CANN hal layer).

Everything crosses as integers and bytes: resource ids, SQE bytes in, CQE bytes out, addresses.
Errors are CannErrors with the ACL runtime code, raised where they are detected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

from cannrt.abi import SQE_BYTES, DumpMode, DumpRecord, ExceptionRecord, TaskRecord
from cannrt.abi.records import TaskSink
from cannrt.config import Settings
from cannrt.device.fabric import Fabric
from cannrt.device.npu import Npu
from cannrt.device.sync import DeviceHang
from cannrt.driver.base import SpaceInfo, serialised
from cannrt.driver.memory_calls import MemoryCalls
from cannrt.driver.sq_ring import SqRing
from cannrt.errors import CannError, CannTimeout, ErrorCode


class WaitResult(NamedTuple):
    """How a host wait ended: whether the condition held, and the host time it ended at (the
    completion it waited for, or the modelled deadline)."""

    done: bool
    now_ns: int


class Resource(IntEnum):
    """Kinds of per-device resource ids."""

    STREAM = 0
    EVENT = 1
    SQ = 2
    CQ = 3
    NOTIFY = 4
    MODEL = 5


class Driver(MemoryCalls):
    """The simulated machine seen through its driver: its devices, address spaces and resource ids."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.RLock()  # guards ids, address spaces and HBM bookkeeping
        self.fabric = Fabric()
        self._devices: dict[int, Npu] = {}
        self._rings: dict[tuple[int, int], SqRing] = {}  # (device, SQ id) -> the mapped ring
        self._spaces: dict[int, SpaceInfo] = {}
        self._next_asid = 0
        # while set, every device opened is traced into the record sink this returns for it
        self.trace_sinks: Callable[[int], TaskSink] | None = None
        self._free_asids: list[int] = []  # ids of destroyed address spaces, reused lowest first
        self._ids: dict[tuple[int, Resource], tuple[int, set[int]]] = {}
        self._limits = {
            Resource.STREAM: settings.chip.max_streams,
            Resource.EVENT: settings.chip.max_events,
            Resource.SQ: settings.chip.max_streams,
            Resource.CQ: 1024,
            Resource.NOTIFY: 8192,
            Resource.MODEL: 2048,
        }

    # -- devices -----------------------------------------------------------------------------
    def device_count(self) -> int:
        """Number of devices on this host."""
        return self.settings.device_count

    @serialised
    def open(self, dev: int) -> None:
        """Power up a device (idempotent)."""
        self._check_dev(dev)
        if dev not in self._devices:
            self._devices[dev] = Npu(dev, self.settings, self.fabric)
            if self.trace_sinks is not None:
                self.trace_start(dev, self.trace_sinks(dev))

    @serialised
    def close(self, dev: int) -> None:
        """Power down a device: stop its worker, drop its memory and queues."""
        npu = self._devices.pop(dev, None)
        if npu is None:
            return
        npu.close()
        for asid in [a for a, info in self._spaces.items() if info.space.device_id == dev]:
            self.space_destroy(asid)
        self._ids = {key: value for key, value in self._ids.items() if key[0] != dev}
        self._rings = {key: ring for key, ring in self._rings.items() if key[0] != dev}

    def close_all(self) -> None:
        """Power down every device."""
        for dev in list(self._devices):
            self.close(dev)

    def _check_dev(self, dev: int) -> None:
        if not 0 <= dev < self.settings.device_count:
            raise CannError(
                ErrorCode.RT_INVALID_DEVICEID, f"device {dev} does not exist (0..{self.settings.device_count - 1})"
            )

    def _npu(self, dev: int) -> Npu:
        try:
            return self._devices[dev]
        except KeyError:
            self._check_dev(dev)
            raise CannError(ErrorCode.RT_INVALID_DEVICEID, f"device {dev} is not open") from None

    # -- resource ids ------------------------------------------------------------------------
    @serialised
    def resource_alloc(self, dev: int, kind: Resource) -> int:
        """Allocate a resource id; CannError RT_RESOURCE_ALLOC_FAIL/207007/207008 when exhausted."""
        self._npu(dev)
        next_id, free = self._ids.get((dev, kind), (0, set()))
        if free:
            rid = min(free)
            free.discard(rid)
        elif next_id < self._limits[kind]:
            rid = next_id
            next_id += 1
        else:
            code = {
                Resource.EVENT: ErrorCode.RT_NO_EVENT_RESOURCE,
                Resource.STREAM: ErrorCode.RT_NO_STREAM_RESOURCE,
            }.get(kind, ErrorCode.RT_RESOURCE_ALLOC_FAIL)
            raise CannError(code, f"no free {kind.name.lower()} id on device {dev} (limit {self._limits[kind]})")
        self._ids[(dev, kind)] = (next_id, free)
        if kind == Resource.EVENT:
            self._devices[dev].clear_event_slot(rid)
        return rid

    @serialised
    def resource_free(self, dev: int, kind: Resource, rid: int) -> None:
        """Return a resource id."""
        next_id, free = self._ids.get((dev, kind), (0, set()))
        free.add(rid)
        self._ids[(dev, kind)] = (next_id, free)

    # -- queues and tasks --------------------------------------------------------------------
    @serialised
    def cq_alloc(self, dev: int) -> int:
        """Allocate a completion queue."""
        cq_id = self.resource_alloc(dev, Resource.CQ)
        self._npu(dev).create_cq(cq_id)
        return cq_id

    @serialised
    def sq_alloc(self, dev: int, stream_id: int, asid: int, priority: int, cq_id: int) -> int:
        """Allocate an SQ bound to a stream id, an address space and a CQ."""
        space = self._space(asid).space
        sq_id = self.resource_alloc(dev, Resource.SQ)
        sq = self._npu(dev).create_sq(sq_id, stream_id, asid, priority, cq_id)
        self._rings[(dev, sq_id)] = SqRing(self._npu(dev), sq, space)
        return sq_id

    @serialised
    def sq_free(self, dev: int, sq_id: int, discard: bool) -> None:
        """Free an SQ; discard drops tasks not yet run."""
        self._npu(dev).destroy_sq(sq_id, discard)
        self._rings.pop((dev, sq_id), None)
        self.resource_free(dev, Resource.SQ, sq_id)

    def sq_map(self, dev: int, sq_id: int) -> SqRing:
        """The SQ mapped into the caller: write SQEs and parameter blocks, ring the doorbell."""
        try:
            return self._rings[(dev, sq_id)]
        except KeyError:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"SQ {sq_id} of device {dev} is not allocated") from None

    def sq_set_stop_on_error(self, dev: int, sq_id: int, stop: bool) -> None:
        """Failure mode of the SQ: stop-on-error discards tasks after the first failure."""
        self._npu(dev).set_stop_on_error(sq_id, stop)

    def task_send(
        self, dev: int, sq_id: int, sqes: bytes, arrival_ns: int, param_va: int = 0, params: bytes = b""
    ) -> int:
        """Submit packed SQEs arriving at host time arrival_ns (and a parameter block for the
        first); returns the first position at once."""
        ring = self.sq_map(dev, sq_id)
        first = (
            ring.send_with_params(sqes[:SQE_BYTES], arrival_ns, param_va, params)
            if params
            else ring.send(sqes[:SQE_BYTES], arrival_ns)
        )
        for offset in range(SQE_BYTES, len(sqes), SQE_BYTES):
            ring.send(sqes[offset : offset + SQE_BYTES], arrival_ns)
        return first

    def sq_head(self, dev: int, sq_id: int, now_ns: int) -> int:
        """Tasks of the SQ completed by host time now_ns on the modelled timeline."""
        return self._npu(dev).sq_head(sq_id, now_ns)

    def sq_wait(self, dev: int, sq_id: int, position: int, now_ns: int, timeout_ns: int | None) -> WaitResult:
        """Host wait from now_ns until the SQ head reaches position."""
        npu = self._npu(dev)
        return self._wait(npu, npu.sq_done(sq_id, position), now_ns, timeout_ns)

    def device_wait_idle(self, dev: int, now_ns: int, timeout_ns: int | None) -> WaitResult:
        """Host wait from now_ns until every SQ of the device is drained."""
        npu = self._npu(dev)
        return self._wait(npu, npu.idle, now_ns, timeout_ns)

    def event_read(self, dev: int, event_id: int, now_ns: int) -> tuple[int, int]:
        """(value, timestamp ns) of a device event slot as of host time now_ns."""
        return self._npu(dev).event_slot(event_id, now_ns)

    def event_wait(
        self, dev: int, event_id: int, value: int, mode: int, now_ns: int, timeout_ns: int | None
    ) -> WaitResult:
        """Host wait on an event slot (TIMELINE: >= value; BINARY: != 0)."""
        npu = self._npu(dev)
        return self._wait(npu, npu.event_reached(event_id, value, mode), now_ns, timeout_ns)

    def report_receive(self, dev: int, cq_id: int, count: int, now_ns: int) -> bytes:
        """Up to count completion reports posted by host time now_ns (packed CQEs)."""
        return self._npu(dev).take_reports(cq_id, count, now_ns)

    def report_wait(self, dev: int, cq_id: int, now_ns: int, timeout_ns: int | None) -> WaitResult:
        """Host wait until the CQ holds a report (the completion interrupt)."""
        npu = self._npu(dev)
        return self._wait(npu, npu.cq_nonempty(cq_id), now_ns, timeout_ns)

    @staticmethod
    def _wait(npu: Npu, done: Callable[[], bool], now_ns: int, timeout_ns: int | None) -> WaitResult:
        try:
            return WaitResult(*npu.wait_until(done, now_ns, timeout_ns))
        except DeviceHang as exc:
            raise CannTimeout(ErrorCode.RT_STREAM_SYNC_TIMEOUT, f"watchdog: {exc}") from None

    def exceptions(self, dev: int, start: int = 0) -> list[ExceptionRecord]:
        """Device exception records from index start."""
        return self._npu(dev).exceptions(start)

    # -- kernels, callbacks, tracing ---------------------------------------------------------
    def kernel_load(self, dev: int, name: str) -> int:
        """Load a registered kernel binary; returns its entry PC. CannError RT_KERNEL_LOOKUP if unknown."""
        try:
            return self._npu(dev).load_kernel(name)
        except KeyError:
            raise CannError(ErrorCode.RT_KERNEL_LOOKUP, f"no kernel named {name!r} is registered") from None

    def set_callback_sink(self, dev: int, sink: Callable[[int, int, int, int, int, int], None]) -> None:
        """Where callback reports of this device go: sink(dev, sq, stream, task, callback, token)."""
        self._npu(dev).set_callback_sink(sink)

    def callback_done(self, dev: int, token: int) -> None:
        """The host finished the callback behind token; CannError if none is pending there."""
        npu = self._npu(dev)
        try:
            npu.callback_done(token)
        except KeyError:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"no callback {token} pending on device {dev}") from None

    def trace_start(self, dev: int, sink: TaskSink | None = None) -> None:
        """Start keeping a record of every task; with sink, the records go to it a chunk at a time as
        tasks complete (the profiling channel a collector drains), instead of being kept on the device."""
        self._npu(dev).trace(True, sink)

    def trace_stop(self, dev: int, now_ns: int) -> list[TaskRecord]:
        """Stop recording; returns the records kept (committed up to host time now_ns)."""
        npu = self._npu(dev)
        records = npu.take_records(now_ns)
        npu.trace(False)
        return records

    def trace_read(self, dev: int, now_ns: int) -> list[TaskRecord]:
        """Records kept so far, up to host time now_ns (tracing continues)."""
        return self._npu(dev).take_records(now_ns)

    def dump_configure(self, dev: int, inputs: bool, outputs: bool, exception: bool) -> None:
        """Which tensors the device dumps for kernels flagged DUMP, and whether faults dump."""
        mode = (DumpMode.INPUTS if inputs else DumpMode.NONE) | (DumpMode.OUTPUTS if outputs else DumpMode.NONE)
        self._npu(dev).configure_dump(mode, exception)

    def op_timeout_configure(self, dev: int, execute_ns: int, wait_ns: int, now_ns: int) -> None:
        """The kernel execute limit and the event wait limit in modelled ns (0: none), from host
        time now_ns on."""
        self._npu(dev).set_op_limits(execute_ns, wait_ns, now_ns)

    def overflow_configure(self, dev: int, check: bool, dump: bool) -> None:
        """Overflow detection (a float exception fails its kernel) and the overflow dump."""
        self._npu(dev).configure_overflow(check, dump)

    def saturation_configure(self, dev: int, on: bool) -> None:
        """Saturation mode of the float units (aclrtSetDeviceSatMode)."""
        self._npu(dev).set_saturation(on)

    def overflow_status(self, dev: int, reset: bool = False) -> bytes:
        """The 64-byte overflow status register (reset: cleared after reading)."""
        return self._npu(dev).overflow_status(reset)

    def dump_read(self, dev: int, now_ns: int) -> list[DumpRecord]:
        """Dump records of tasks completed by host time now_ns (taken once)."""
        return self._npu(dev).take_dumps(now_ns)

    # -- memory ------------------------------------------------------------------------------


__all__ = [
    "Driver",
    "Resource",
]
