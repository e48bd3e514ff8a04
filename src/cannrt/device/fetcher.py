"""The task scheduler's front end: the SQ table, doorbells, and fetching SQEs into tasks.

Every SQE is decoded the same way: its bytes (less the task id) map to one decoded SQE shared by
the tasks that repeat it, and a kernel's parameter block is read from device memory at fetch (the
SQE's prefetch) and decoded once per distinct block.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from cannrt.abi import (
    TASK_ID_AT,
    DescriptorError,
    ErrorType,
    KernelSqe,
    ParamValue,
    Sqe,
    decode_header,
    decode_sqe,
    unpack_params,
)
from cannrt.device.code import KernelCode
from cannrt.device.fabric import Fabric
from cannrt.device.memory import DeviceFault
from cannrt.device.queues import SubmissionQueue
from cannrt.device.reports import Reports
from cannrt.device.sync import DeviceHang, DeviceSync
from cannrt.device.task import Task
from cannrt.errors import ErrorCode
from cannrt.kernels.registry import Kernel

CACHE_LIMIT = 4096  # decoded SQEs / parameter blocks kept before the caches start over
_TASK_ID_END = TASK_ID_AT + 2
_KERNEL_LOOKUP = int(ErrorCode.RT_KERNEL_LOOKUP)
_TASK_TYPE_NOT_SUPPORT = int(ErrorCode.RT_TASK_TYPE_NOT_SUPPORT)


class Fetcher:
    """SQs of one device, the doorbells rung on them, and their decoding into tasks."""

    def __init__(
        self,
        code: KernelCode,
        fabric: Fabric,
        reports: Reports,
        sync: DeviceSync,
        on_fetched: Callable[[SubmissionQueue], None],
    ) -> None:
        self._code = code
        self._fabric = fabric
        self._reports = reports
        self._sync = sync
        self._on_fetched = on_fetched  # the scheduler: an idle SQ got tasks
        self.sqs: dict[int, SubmissionQueue] = {}
        self.sq_list: list[SubmissionQueue] = []  # snapshot the worker iterates
        self.doorbells: deque[SubmissionQueue] = deque()  # one entry per SQ until fetched
        # SQE bytes less the task id -> (decoded SQE, kernel); parameter block -> arguments
        self._decoded: dict[bytes, tuple[Sqe, Kernel | None]] = {}
        self._params: dict[bytes, tuple[ParamValue, ...]] = {}

    # -- the SQ table ------------------------------------------------------------------------
    def add(self, sq: SubmissionQueue) -> None:
        """A new SQ (lock held)."""
        self.sqs[sq.sq_id] = sq
        self.sq_list = list(self.sqs.values())

    def remove(self, sq_id: int) -> SubmissionQueue:
        """Take an SQ out after fetching what was written to it (lock held)."""
        sq = self.sqs.pop(sq_id)
        self.fetch(sq)
        sq.closed = True
        self.sq_list = list(self.sqs.values())
        return sq

    def submitted(self) -> int:
        """SQEs written into the open SQs so far: the worker watches it for a quiet host."""
        return sum(sq.tail for sq in self.sq_list)

    # -- doorbells ---------------------------------------------------------------------------
    def wait_for_space(self, sq: SubmissionQueue) -> None:
        """Block until sq has a free entry (the device fetches); DeviceHang after the watchdog."""
        sync = self._sync
        deadline = time.monotonic() + sync.watchdog_s
        while sq.tail - sq.fetched >= sq.depth:
            with sync.lock:  # blocks (not spins) while another thread is in the middle of a fetch
                self.drain()
            if time.monotonic() > deadline:
                raise DeviceHang(f"SQ {sq.sq_id} stayed full for {sync.watchdog_s} s")

    def has_unfetched(self) -> bool:
        """True if a doorbell was rung since the last fetch."""
        return bool(self.doorbells)

    def fetch_all(self) -> None:
        """Decode every SQE written since the last fetch (the TS reading its SQs)."""
        if self.doorbells:
            with self._sync.lock:
                self.drain()

    def drain(self) -> None:
        """fetch_all with the lock held."""
        doorbells = self.doorbells
        while doorbells:
            sq = doorbells.popleft()
            sq.rung = False  # before reading the tail: a later write rings again
            self.fetch(sq)

    # -- decoding ----------------------------------------------------------------------------
    def fetch(self, sq: SubmissionQueue) -> None:
        """Decode the SQEs between the SQ's fetch position and its tail into tasks."""
        model_queue = sq.model_queue
        was_idle = not model_queue
        ring, arrivals, depth, decode = sq.ring, sq.arrival_ns, sq.depth, self._decode
        to_run, to_model = sq.real_queue.append, model_queue.append
        position, tail = sq.fetched, sq.tail
        while position < tail:
            slot = position % depth
            task = decode(sq, position, ring[slot], arrivals[slot])
            position += 1
            sq.fetched = position
            to_run(task)
            to_model(task)
        if was_idle and model_queue:
            self._on_fetched(sq)

    def _decode(self, sq: SubmissionQueue, position: int, raw: bytes, arrival: int) -> Task:
        known = self._decode_new(raw)
        if known is None:
            header = decode_header(raw)
            task = Task(sq, position, header, raw, arrival, header.task_id)  # type: ignore[arg-type]
            task.status = _TASK_TYPE_NOT_SUPPORT
            return task
        sqe, kernel = known
        task = Task(sq, position, sqe, raw, arrival, raw[TASK_ID_AT] | raw[TASK_ID_AT + 1] << 8)
        if kernel is not None:
            task.kernel = kernel
            if sqe.param_size:  # type: ignore[union-attr]
                self._prefetch_params(task, sqe)  # type: ignore[arg-type]
        return task

    def _decode_new(self, raw: bytes) -> tuple[Sqe, Kernel | None] | None:
        """The decoded SQE and kernel of raw, decoded once per distinct SQE less its task id
        (None if the task scheduler cannot decode it)."""
        key = raw[:TASK_ID_AT] + raw[_TASK_ID_END:]
        known = self._decoded.get(key)
        if known is None:
            try:
                decoded = decode_sqe(raw)
            except DescriptorError:
                return None
            kernel = self._code.at(decoded.pc) if isinstance(decoded, KernelSqe) else None
            if len(self._decoded) >= CACHE_LIMIT:
                self._decoded.clear()
            known = self._decoded[key] = (decoded, kernel)
        return known

    def _prefetch_params(self, task: Task, sqe: KernelSqe) -> None:
        """Read the parameter block from device memory (the SQE's prefetch) and decode it (once
        per distinct block)."""
        try:
            block = self._fabric.space(task.sq.asid).view(sqe.param, sqe.param_size, "read").tobytes()
            args = self._params.get(block)
            if args is None:
                args = tuple(unpack_params(block))
                if len(self._params) >= CACHE_LIMIT:
                    self._params.clear()
                self._params[block] = args
            task.args = args
        except (DeviceFault, DescriptorError, KeyError) as exc:
            self._reports.fault(task, _KERNEL_LOOKUP, ErrorType.AICORE, ("MTE_READ_OVERFLOW",), str(exc))
