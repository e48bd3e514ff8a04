"""The task scheduler's front end: the SQ table, doorbells, and fetching SQEs into tasks.

Every SQE is decoded the same way: its bytes (less the task id) map to one decoded SQE shared by
the tasks that repeat it, and a kernel's parameter block is read from device memory at fetch (the
SQE's prefetch) and decoded once per distinct block.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from cannrt.abi import (
    TASK_ID_AT,
    DescriptorError,
    ErrorType,
    KernelSqe,
    ParamValue,
    decode_header,
    decode_sqe,
    unpack_params,
)
from cannrt.device.code import KernelCode
from cannrt.device.fabric import Fabric
from cannrt.device.memory import AddressSpace, DeviceFault
from cannrt.device.queues import SubmissionQueue
from cannrt.device.reports import Reports
from cannrt.device.sync import DeviceHang, DeviceSync
from cannrt.device.task import Task
from cannrt.errors import ErrorCode

CACHE_LIMIT = 4096  # decoded SQEs / parameter blocks kept before the caches start over
_TASK_ID_END = TASK_ID_AT + 2
_KERNEL_LOOKUP = int(ErrorCode.RT_KERNEL_LOOKUP)
_TASK_TYPE_NOT_SUPPORT = int(ErrorCode.RT_TASK_TYPE_NOT_SUPPORT)
Decoded = list[Any]
"""One distinct SQE: [decoded SQE, its kernel (None if not a kernel or no code at its PC),
parameter block bytes, then the address space, its generation and the view the block was last
read through]."""


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
        # SQE bytes less the task id -> Decoded; parameter block -> arguments
        self._decoded: dict[bytes, Decoded] = {}
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
        ring, arrivals, depth, decoded = sq.ring, sq.arrival_ns, sq.depth, self._decoded
        to_run, to_model = sq.real_queue.append, model_queue.append
        position, tail = sq.fetched, sq.tail
        try:
            space: AddressSpace | None = self._fabric.space(sq.asid)  # where parameter blocks are read
        except KeyError:  # the context is gone: _prefetch_params reports each task
            space = None
        params = self._params
        while position < tail:
            slot = position % depth
            raw = ring[slot]
            known = decoded.get(raw[:TASK_ID_AT] + raw[_TASK_ID_END:]) or self._decode_new(raw)
            if known is None:
                header = decode_header(raw)
                task = Task(sq, position, header, raw, arrivals[slot], header.task_id)  # type: ignore[arg-type]
                task.status = _TASK_TYPE_NOT_SUPPORT
            else:
                kernel = known[1]
                args: tuple[ParamValue, ...] | None = ()
                if kernel is not None and known[2]:  # the block, through the view kept while its mapping is unchanged
                    args = None
                    if space is not None and known[3] is space and known[4] == space.generation:
                        args = params.get(known[5].tobytes())
                task_id = raw[TASK_ID_AT] | raw[TASK_ID_AT + 1] << 8
                task = Task(sq, position, known[0], raw, arrivals[slot], task_id, kernel, args or ())
                if args is None:
                    self._prefetch_params(task, known, space)
            position += 1
            sq.fetched = position
            to_run(task)
            to_model(task)
        if was_idle and model_queue:
            self._on_fetched(sq)

    def _decode_new(self, raw: bytes) -> Decoded | None:
        """The decoded SQE of raw, decoded once per distinct SQE less its task id (None if the
        task scheduler cannot decode it)."""
        try:
            sqe = decode_sqe(raw)
        except DescriptorError:
            return None
        if len(self._decoded) >= CACHE_LIMIT:
            self._decoded.clear()
        if isinstance(sqe, KernelSqe):
            known: Decoded = [sqe, self._code.at(sqe.pc), sqe.param_size, None, 0, None]
        else:
            known = [sqe, None, 0, None, 0, None]
        self._decoded[raw[:TASK_ID_AT] + raw[_TASK_ID_END:]] = known
        return known

    def _prefetch_params(self, task: Task, known: Decoded, space: AddressSpace | None) -> None:
        """Read the parameter block from device memory (the SQE's prefetch) and decode it (once
        per distinct block) in the SQ's address space (None: its context is gone). The view of
        the block is kept while its mapping is unchanged."""
        try:
            if space is None:
                raise KeyError(task.sq.asid)  # as the lookup itself raised
            if known[3] is not space or known[4] != space.generation:
                sqe: KernelSqe = known[0]
                known[3:] = space, space.generation, space.view(sqe.param, sqe.param_size, "read")
            block = known[5].tobytes()
            args = self._params.get(block)
            if args is None:
                args = tuple(unpack_params(block))
                if len(self._params) >= CACHE_LIMIT:
                    self._params.clear()
                self._params[block] = args
            task.args = args
        except (DeviceFault, DescriptorError, KeyError) as exc:
            self._reports.fault(task, _KERNEL_LOOKUP, ErrorType.AICORE, ("MTE_READ_OVERFLOW",), str(exc))
