"""The driver: the only door between the runtime and the device (models the CANN hal layer).

Everything crosses as integers and bytes: resource ids, SQE bytes in, CQE bytes out, addresses.
Errors are CannErrors with the ACL runtime code, raised where they are detected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import IntEnum

from cannrt.abi import (
    DumpRecord,
    EventMode,
    ExceptionRecord,
    TaskRecord,
)
from cannrt.config import Settings
from cannrt.device.clock import HostClock
from cannrt.device.fabric import Fabric
from cannrt.device.npu import DeviceHang, Npu
from cannrt.device.queues import TailRegister as TailRegister
from cannrt.driver.base import SpaceInfo, serialised
from cannrt.driver.memory_calls import MemoryCalls
from cannrt.errors import CannError, CannTimeout, ErrorCode


class Resource(IntEnum):
    """Kinds of per-device resource ids."""

    STREAM = 0
    EVENT = 1
    SQ = 2
    CQ = 3
    NOTIFY = 4
    MODEL = 5


class Driver(MemoryCalls):
    """The simulated machine seen through its driver: one HostClock, several devices."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.RLock()  # guards ids, address spaces and HBM bookkeeping
        self.clock = HostClock()
        self.fabric = Fabric()
        self._devices: dict[int, Npu] = {}
        self._spaces: dict[int, SpaceInfo] = {}
        self._next_asid = 0
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
            self._devices[dev] = Npu(dev, self.settings, self.clock, self.fabric)

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
        sq_id = self.resource_alloc(dev, Resource.SQ)
        self._npu(dev).create_sq(sq_id, stream_id, asid, priority, cq_id)
        return sq_id

    @serialised
    def sq_free(self, dev: int, sq_id: int, discard: bool) -> None:
        """Free an SQ; discard drops tasks not yet run."""
        self._npu(dev).destroy_sq(sq_id, discard)
        self.resource_free(dev, Resource.SQ, sq_id)

    def sq_set_stop_on_error(self, dev: int, sq_id: int, stop: bool) -> None:
        """Failure mode of the SQ: stop-on-error discards tasks after the first failure."""
        self._npu(dev).sqs[sq_id].stop_on_error = stop

    def task_send(self, dev: int, sq_id: int, sqe: bytes, param_va: int = 0, params: bytes = b"") -> int:
        """Submit packed SQEs (and a kernel parameter block); returns at once with the position."""
        return self._devices[dev].task_send(sq_id, sqe, param_va, params)

    def sq_sender(self, dev: int, sq_id: int) -> Callable[[bytes, int, bytes], int]:
        """Map an SQ into the caller: a function (sqe, param_va, params) -> position that writes
        one SQE (and its parameter block) and rings the doorbell, as a user-mapped ring would."""
        return self._npu(dev).sq_sender(sq_id)

    def sq_template_sender(
        self, dev: int, sq_id: int, template: bytes, host_ns: int, lock: threading.Lock, tail: TailRegister
    ) -> Callable[[], int]:
        """Map an SQ for one repeated SQE: a function () -> position that sends `template` with
        the next task id, under the producer's `lock`, keeping `tail` up to date."""
        return self._npu(dev).sq_template_sender(sq_id, template, host_ns, lock, tail)

    def sq_head(self, dev: int, sq_id: int) -> int:
        """Tasks of the SQ completed by now on the modelled timeline."""
        npu = self._npu(dev)
        npu.catch_up()
        return npu.sqs[sq_id].model_head

    def sq_wait(self, dev: int, sq_id: int, position: int, timeout_ns: int | None) -> bool:
        """Host wait until the SQ head reaches position; False on a modelled timeout."""
        npu = self._npu(dev)
        sq = npu.sqs[sq_id]
        return self._wait(npu, lambda: sq.model_head >= position or sq.closed, timeout_ns)

    def device_wait_idle(self, dev: int, timeout_ns: int | None) -> bool:
        """Host wait until every SQ of the device is drained."""
        npu = self._npu(dev)

        def idle() -> bool:
            return all(sq.model_head >= sq.tail for sq in npu.active_sqs())

        return self._wait(npu, idle, timeout_ns)

    def event_read(self, dev: int, event_id: int) -> tuple[int, int]:
        """(value, timestamp ns) of a device event slot as of the host clock."""
        npu = self._npu(dev)
        npu.catch_up()
        return npu.timeline.slots.get(event_id, (0, 0))

    def event_wait(self, dev: int, event_id: int, value: int, mode: int, timeout_ns: int | None) -> bool:
        """Host wait on an event slot (TIMELINE: >= value; BINARY: != 0)."""
        npu = self._npu(dev)
        slots = npu.timeline.slots

        def reached() -> bool:
            current = slots.get(event_id, (0, 0))[0]
            return current != 0 if mode == EventMode.BINARY else current >= value

        return self._wait(npu, reached, timeout_ns)

    def report_receive(self, dev: int, cq_id: int, count: int) -> bytes:
        """Up to count completion reports posted by now (packed CQEs)."""
        npu = self._npu(dev)
        npu.catch_up()
        return npu.cqs[cq_id].take(count)

    def report_wait(self, dev: int, cq_id: int, timeout_ns: int | None) -> bool:
        """Host wait until the CQ holds a report (the completion interrupt)."""
        npu = self._npu(dev)
        cq = npu.cqs[cq_id]
        return self._wait(npu, lambda: bool(cq.reports), timeout_ns)

    def _wait(self, npu: Npu, done: Callable[[], bool], timeout_ns: int | None) -> bool:
        try:
            return npu.wait_until(done, timeout_ns)
        except DeviceHang as exc:
            raise CannTimeout(ErrorCode.RT_STREAM_SYNC_TIMEOUT, f"watchdog: {exc}") from None

    def exceptions(self, dev: int, start: int = 0) -> list[ExceptionRecord]:
        """Device exception records from index start."""
        return self._npu(dev).exceptions[start:]

    # -- kernels, callbacks, tracing ---------------------------------------------------------
    def kernel_load(self, dev: int, name: str) -> int:
        """Load a registered kernel binary; returns its entry PC. CannError RT_KERNEL_LOOKUP if unknown."""
        try:
            return self._npu(dev).load_kernel(name)
        except KeyError:
            raise CannError(ErrorCode.RT_KERNEL_LOOKUP, f"no kernel named {name!r} is registered") from None

    def set_callback_sink(self, dev: int, sink: Callable[[int, int, int, int, int, int], None]) -> None:
        """Where callback reports of this device go."""
        self._npu(dev).callback_sink = sink

    def callback_done(self, dev: int, token: int) -> None:
        """The host finished the callback behind token."""
        self._npu(dev).callback_done(token)

    def trace_start(self, dev: int) -> None:
        """Start keeping a record of every task."""
        timeline = self._npu(dev).timeline
        if timeline.records is None:
            timeline.records = []

    def trace_stop(self, dev: int) -> list[TaskRecord]:
        """Stop recording; returns the records kept (committed up to the host clock)."""
        npu = self._npu(dev)
        npu.catch_up()
        records = npu.timeline.records or []
        npu.timeline.records = None
        return records

    def trace_read(self, dev: int) -> list[TaskRecord]:
        """Records kept so far (tracing continues)."""
        npu = self._npu(dev)
        npu.catch_up()
        records = npu.timeline.records or []
        npu.timeline.records = [] if npu.timeline.records is not None else None
        return records

    def dump_configure(self, dev: int, inputs: bool, outputs: bool, exception: bool) -> None:
        """Which tensors the device dumps for kernels flagged DUMP, and whether faults dump."""
        npu = self._npu(dev)
        npu.dump_mode = (1 if inputs else 0) | (2 if outputs else 0)
        npu.exception_dump = exception

    def dump_read(self, dev: int) -> list[DumpRecord]:
        """Dump records of tasks completed by now on the modelled timeline (taken once)."""
        npu = self._npu(dev)
        npu.catch_up()
        with npu.lock:
            records, npu.dump_records = npu.dump_records, []
        return records

    # -- memory ------------------------------------------------------------------------------


__all__ = [
    "Driver",
    "Resource",
]
