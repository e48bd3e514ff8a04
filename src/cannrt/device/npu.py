"""One simulated NPU: HBM, SQ/CQ rings, the task scheduler (timeline) and the real worker.

It knows nothing above the driver: it is handed bytes (SQEs, parameter blocks) and integers.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from collections.abc import Callable

from cannrt.abi import (
    SQE_BYTES,
    CallbackSqe,
    DescriptorError,
    DumpRecord,
    ExceptionRecord,
    KernelSqe,
    SqeType,
    decode_header,
    decode_sqe,
    unpack_params,
)
from cannrt.config import Settings
from cannrt.device import sq_mapping
from cannrt.device.clock import HostClock
from cannrt.device.executor import KERNEL_LOOKUP, TASK_TYPE_NOT_SUPPORT, Executor
from cannrt.device.fabric import Fabric
from cannrt.device.memory import DeviceFault, Hbm
from cannrt.device.queues import TASK_ID_AT, CompletionQueue, SubmissionQueue, TailRegister
from cannrt.device.task import Task
from cannrt.device.timeline import NEVER, Timeline
from cannrt.kernels.registry import Kernel, get_kernel

CODE_BASE = 1 << 36  # kernel code window (below every data address space)
CODE_STRIDE = 0x1000
SQE_WORDS = struct.Struct("<16I")
STUCK_GRACE_S = 0.05  # wall time a bounded host wait gives other host threads before timing out
HOST_WORK_GRACE_S = 1.0  # the same while a reported callback still runs on a host thread

CallbackSink = Callable[[int, int, int, int, int, int], None]  # dev, sq, stream, task, callback, token


def _ran(task: Task) -> bool:
    """Whether the worker has run task (read anew each time: another thread sets it)."""
    return task.real_done


_PLACE_HOLDER = int(SqeType.PLACE_HOLDER)
_EVENT_WAIT = int(SqeType.EVENT_WAIT)


class DeviceHang(Exception):
    """A real wait exceeded the wall-clock watchdog."""


class Npu:
    """The simulated chip: everything below the driver."""

    def __init__(self, device_id: int, settings: Settings, clock: HostClock, fabric: Fabric) -> None:
        self.device_id = device_id
        self.settings = settings
        self.clock = clock
        self.fabric = fabric
        self.lock = threading.Condition(threading.Lock())
        self.hbm = Hbm(settings.chip.hbm_bytes)
        self.sqs: dict[int, SubmissionQueue] = {}
        self.cqs: dict[int, CompletionQueue] = {}
        self._sq_list: list[SubmissionQueue] = []
        self.doorbells: deque[SubmissionQueue] = deque()
        self.kernels: dict[int, Kernel] = {}
        self._kernel_pcs: dict[str, int] = {}
        self.exceptions: list[ExceptionRecord] = []
        self.dump_mode = 0  # DUMP_INPUTS | DUMP_OUTPUTS for kernels whose SQE carries the DUMP bit
        self.exception_dump = False  # keep a failing kernel's tensors
        self.dump_records: list[DumpRecord] = []  # completed on the timeline, not yet read
        self.callback_sink: CallbackSink | None = None
        self._callback_tokens: dict[int, Task] = {}
        self._next_token = 1
        self._awaited: Task | None = None  # the task the timeline waits to see run for real
        self.host_waiters = 0
        self.timeline = Timeline(self)
        self.executor = Executor(self)
        self.executor.start()

    # -- kernels -----------------------------------------------------------------------------
    def load_kernel(self, name: str) -> int:
        """Place a registered kernel's code in device memory; returns its entry PC."""
        kernel = get_kernel(name)
        pc = self._kernel_pcs.get(name)
        if pc is None or self.kernels[pc] is not kernel:  # new, or replaced: a new binary
            pc = CODE_BASE + CODE_STRIDE * (len(self.kernels) + 1)
            self._kernel_pcs[name] = pc
            self.kernels[pc] = kernel
        return pc

    def clear_event_slot(self, event_id: int) -> None:
        """A reused event id starts from zero in both views."""
        with self.lock:
            self.timeline.slots.pop(event_id, None)

    # -- queues ------------------------------------------------------------------------------
    def create_sq(self, sq_id: int, stream_id: int, asid: int, priority: int, cq_id: int) -> SubmissionQueue:
        """Bring up an SQ bound to a stream and a CQ."""
        sq = SubmissionQueue(sq_id, self.settings.chip.sq_depth, stream_id, asid, priority, cq_id)
        with self.lock:
            self.sqs[sq_id] = sq
            self._sq_list = list(self.sqs.values())
        return sq

    def destroy_sq(self, sq_id: int, discard: bool) -> None:
        """Tear down an SQ; with discard, tasks not yet run are dropped (destroy_force)."""
        with self.lock:
            sq = self.sqs.pop(sq_id)
            self._fetch(sq)
            sq.closed = True
            if discard:
                for task in sq.real_queue:
                    task.discarded = True
                sq.model_queue.clear()
            self.timeline.forget(sq)
            self._sq_list = list(self.sqs.values())

    def create_cq(self, cq_id: int) -> None:
        """Bring up a completion queue."""
        self.cqs[cq_id] = CompletionQueue(cq_id)

    def submitted(self) -> int:
        """SQEs written into the open SQs so far: the worker watches it for a quiet host."""
        return sum(sq.tail for sq in self._sq_list)

    def active_sqs(self) -> list[SubmissionQueue]:
        """SQs the worker visits (a snapshot)."""
        return self._sq_list

    def task_send(self, sq_id: int, data: bytes, param_va: int = 0, params: bytes = b"") -> int:
        """Write SQEs (and a parameter block at param_va) and ring the doorbell; returns the first
        position. Never blocks on the device's execution, only (briefly) on a full ring."""
        send = self.sq_sender(sq_id)
        position = send(data[:SQE_BYTES], param_va, params)
        for offset in range(SQE_BYTES, len(data), SQE_BYTES):
            send(data[offset : offset + SQE_BYTES], 0, b"")
        return position

    def sq_sender(self, sq_id: int) -> Callable[[bytes, int, bytes], int]:
        """The user-space mapping of an SQ: a function that writes one SQE and rings the doorbell
        (see sq_mapping.sq_sender)."""
        return sq_mapping.sq_sender(self, self.sqs[sq_id])

    def sq_template_sender(
        self, sq_id: int, template: bytes, host_ns: int, lock: threading.Lock, tail: TailRegister
    ) -> Callable[[], int]:
        """A sender of one repeated SQE `template` (see sq_mapping.sq_template_sender)."""
        return sq_mapping.sq_template_sender(self, self.sqs[sq_id], template, host_ns, lock, tail)

    def wait_for_ring_space(self, sq: SubmissionQueue, count: int) -> None:
        self.executor.hurry()
        deadline = time.monotonic() + self.settings.watchdog_s
        while sq.tail + count - sq.fetched > sq.depth:
            self.fetch_all()
            if time.monotonic() > deadline:
                raise DeviceHang(f"SQ {sq.sq_id} stayed full for {self.settings.watchdog_s} s")

    def has_unfetched(self) -> bool:
        """True if a doorbell was rung since the last fetch."""
        return bool(self.doorbells)

    def fetch_all(self) -> None:
        """Decode every SQE written since the last fetch (the TS reading its SQs)."""
        if not self.doorbells:
            return
        with self.lock:
            self._drain_doorbells()

    def _fetch(self, sq: SubmissionQueue) -> None:
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
            self.timeline.on_fetched(sq)

    def _decode(self, sq: SubmissionQueue, position: int, raw: bytes, arrival: int) -> Task:
        template = sq.template
        if template is not None and raw.startswith(template[0]) and raw.endswith(template[1]):
            # the same parameterless kernel SQE as the last one but for its task id: share it
            sqe = template[2]
            task = Task(sq, position, sqe, raw, arrival, raw[TASK_ID_AT] | raw[TASK_ID_AT + 1] << 8)
            task.kernel = self.kernels.get(sqe.pc)
            return task
        try:
            decoded = decode_sqe(raw)
        except DescriptorError:
            header = decode_header(raw)
            task = Task(sq, position, header, raw, arrival, header[4])  # type: ignore[arg-type]
            task.status = TASK_TYPE_NOT_SUPPORT
            return task
        task = Task(sq, position, decoded, raw, arrival, decoded.task_id)
        if decoded.__class__ is KernelSqe:
            kernel = task.kernel = self.kernels.get(decoded.pc)
            if decoded.param_size:
                if kernel is not None:
                    self._prefetch_params(task, decoded)
            else:
                sq.template = (raw[:TASK_ID_AT], raw[TASK_ID_AT + 2 :], decoded)
        return task

    def _prefetch_params(self, task: Task, sqe: KernelSqe) -> None:
        """Read the parameter block (the SQE's prefetch)."""
        try:
            space = self.fabric.space(task.sq.asid)
            block = space.view(sqe.param, sqe.param_size, "read").tobytes()
            task.args = tuple(unpack_params(block))
        except (DeviceFault, DescriptorError, KeyError) as exc:
            task.status = KERNEL_LOOKUP
            task.fault = self.exception_record(task, KERNEL_LOOKUP, 3, ("MTE_READ_OVERFLOW",), str(exc), 0)

    # -- real completion, callbacks, errors --------------------------------------------------
    def mark_real_done(self, task: Task) -> None:
        """The worker finished a task for real."""
        task.real_done = True
        kind = task.sqe.sqe_type
        if kind == _PLACE_HOLDER:
            with self.lock:
                self.timeline.callback_finished(task)
                self.lock.notify_all()
            return
        if task.discarded and kind == _EVENT_WAIT:
            with self.lock:
                self.timeline.recheck(task.sq)
        if task is self._awaited:
            with self.lock:
                self.lock.notify_all()

    def await_real(self, task: Task, patience_s: float | None = None) -> bool:
        """Block (lock held, released while waiting) until the worker has run task. With a
        patience, give up after that much wall time and return False; without one, a task that
        never runs is a DeviceHang after the watchdog."""
        if task.real_done:
            return True
        limit = self.settings.watchdog_s if patience_s is None else patience_s
        deadline = time.monotonic() + limit
        self._awaited = task  # set before re-checking real_done: the worker notifies for this task
        self.executor.hurry()
        try:
            while not _ran(task):  # set by the worker thread
                self.lock.wait(0.05)
                if time.monotonic() > deadline:
                    if patience_s is not None:
                        return False
                    raise DeviceHang(f"task {task.task_id} on stream {task.sqe.stream_id} never finished")
        finally:
            self._awaited = None
        return True

    def post_callback(self, task: Task) -> None:
        """Report a callback task to the host (the driver routes it to the subscribed thread)."""
        sqe = task.sqe
        assert isinstance(sqe, CallbackSqe)
        token = self._next_token
        self._next_token += 1
        self._callback_tokens[token] = task
        if self.callback_sink is not None:
            self.callback_sink(self.device_id, task.sq.sq_id, sqe.stream_id, task.task_id, sqe.callback_id, token)

    def callback_done(self, token: int) -> None:
        """The host ran a callback's function."""
        task = self._callback_tokens.pop(token)
        self.executor.callback_done(task)

    def post_completion(self, task: Task) -> None:
        """Write a completion report into the SQ's CQ."""
        sqe = task.sqe
        error_type = task.fault.error_type if task.fault else 0
        flags = 1 if task.discarded else 0
        self.cqs[task.sq.cq_id].post(
            sqe.stream_id,
            task.task_id,
            task.status,
            error_type,
            sqe.sqe_type,
            task.sq.sq_id,
            task.position + 1,
            flags,
            task.start_ns,
            task.end_ns,
        )

    def exception_record(
        self, task: Task, code: int, error_type: int, bits: tuple[str, ...], message: str, arg_index: int
    ) -> ExceptionRecord:
        """Snapshot the failing task's registers and SQE (the first scene of the fault)."""
        sqe = task.sqe
        pc = sqe.pc if isinstance(sqe, KernelSqe) else 0
        param = sqe.param if isinstance(sqe, KernelSqe) else 0
        registers = {"pc": pc + 0x40 + 8 * arg_index, "param_base": param, "block_dim": sqe.block_dim}
        for index, arg in enumerate(task.args):
            address = getattr(arg, "address", None)
            if address is not None:
                registers[f"x{index}"] = address
        record = ExceptionRecord(
            serial=len(self.exceptions) + 1,
            device_id=self.device_id,
            stream_id=sqe.stream_id,
            task_id=task.task_id,
            sq_id=task.sq.sq_id,
            core_id=0,
            error_code=code,
            error_type=error_type,
            error_bits=bits,
            pc_start=pc,
            pc_current=registers["pc"],
            para_base=param,
            message=message,
            kernel_name=task.kernel.name if task.kernel else "",
            registers=registers,
            sqe_words=SQE_WORDS.unpack(task.sqe_bytes),
        )
        self.exceptions.append(record)
        return record

    # -- host-visible state on the modelled timeline ----------------------------------------
    def catch_up(self) -> None:
        """Commit the timeline up to the host clock (what the host could observe by now)."""
        with self.lock:
            self._drain_doorbells()
            self.timeline.advance(self.clock.now_ns)

    def _drain_doorbells(self) -> None:
        doorbells = self.doorbells
        while doorbells:
            sq = doorbells.popleft()
            sq.rung = False  # before reading the tail: a later write rings again
            self._fetch(sq)

    def wait_until(self, done: Callable[[], bool], timeout_ns: int | None) -> bool:
        """A host wait: the timeline runs ahead until done() or the modelled deadline passes.

        Returns False on a modelled timeout (the host clock then sits at the deadline).
        """
        start = self.clock.now_ns
        deadline = NEVER if timeout_ns is None or timeout_ns < 0 else start + timeout_ns
        wall_limit = time.monotonic() + self.settings.watchdog_s
        with self.lock:
            self.host_waiters += 1
            try:
                return self._wait_locked(done, deadline, wall_limit)
            finally:
                self.host_waiters -= 1

    def _wait_locked(self, done: Callable[[], bool], deadline: int, wall_limit: float) -> bool:
        while True:
            self._drain_doorbells()
            if self.timeline.advance(deadline, done):
                self.clock.move_to(self.timeline.now)
                return True
            if self.timeline.next_time() != NEVER:  # the next event lies past the deadline
                self.clock.move_to(deadline)
                return False
            if deadline == NEVER:
                grace = max(0.0, wall_limit - time.monotonic())
            elif self.timeline.has_parked_callbacks():
                grace = HOST_WORK_GRACE_S  # a host thread is running a callback: give it time
            else:
                grace = STUCK_GRACE_S
            if not self.lock.wait(grace) and not self.doorbells:
                if deadline != NEVER:
                    self.clock.move_to(deadline)
                    return False
                if time.monotonic() >= wall_limit:
                    raise DeviceHang(f"device {self.device_id}: nothing can make progress")

    def close(self) -> None:
        """Stop the worker and drop all state."""
        self.executor.stop()
