"""The device's report path: completion reports into CQs, fault snapshots, dump records and host
callback reports (what the runtime receives through the driver)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from cannrt.abi import (
    CQE_DISCARDED,
    OVERFLOW_STATUS_BYTES,
    SQE_WORDS,
    CoreKind,
    DumpRecord,
    ErrorType,
    ExceptionRecord,
    KernelSqe,
)
from cannrt.device.code import pc_of_line
from cannrt.device.queues import CompletionQueue
from cannrt.errors import ErrorCode

if TYPE_CHECKING:
    from cannrt.device.task import Task

CallbackSink = Callable[[int, int, int, int, int, int], None]  # dev, sq, stream, task, callback, token


class FaultSite(NamedTuple):
    """Where a fault happened: the tensor, the access, the block and the kernel source line."""

    arg_index: int = -1
    arg_name: str = ""
    tensor: str = ""  # e.g. float32[1025]
    access_kind: str = ""
    access_address: int = 0
    access_size: int = 0
    fault_address: int = 0
    block_index: int = 0
    source: str = ""  # file:line in function
    line: int = 0


class Reports:
    """Everything the device reports upward, in the order the timeline completes tasks."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.cqs: dict[int, CompletionQueue] = {}
        self.exceptions: list[ExceptionRecord] = []
        self.dump_mode = 0  # DumpMode bits: tensors captured for kernels whose SQE carries the DUMP flag
        self.exception_dump = True  # keep a failing kernel's tensors (CANN's default lite exception dump)
        self.execute_limit_ns = 0  # aclrtSetOpExecuteTimeOut: a kernel running longer fails (0: no limit)
        self.wait_limit_ns = 0  # aclrtSetOpWaitTimeout: an event wait blocked longer fails (0: no limit)
        self.overflow_check = False  # overflow detection: a kernel raising a float exception fails
        self.overflow_dump = False  # and its inputs and outputs are dumped ("overflow" dump mode)
        self.saturation = False  # aclrtSetDeviceSatMode SATURATION: inf -> largest finite, nan -> 0
        self.overflow_status = 0  # float exception flags seen since the last reset (numpy's bits)
        # what the worker can still read of a task's tensors (the executor's, wired by the Npu)
        self.read_tensors: Callable[[Task], DumpRecord | None] | None = None
        self.dump_records: list[DumpRecord] = []  # completed on the timeline, not yet read
        self.callback_sink: CallbackSink | None = None
        self._callbacks: dict[int, Task] = {}  # token -> callback task the host has not finished
        self._next_token = 1

    # -- completions -------------------------------------------------------------------------
    def create_cq(self, cq_id: int) -> None:
        """Bring up a completion queue."""
        self.cqs[cq_id] = CompletionQueue(cq_id)

    def post_completion(self, task: Task) -> None:
        """Write a completion report into the task's CQ."""
        sqe = task.sqe
        sq = task.sq
        error_type = task.fault.error_type & 0xFF if task.fault else 0  # one byte in the CQE (OTHERS: 0xFF)
        flags = CQE_DISCARDED if task.discarded else 0
        self.cqs[sq.cq_id].post(
            sqe.stream_id, task.task_id, task.status, error_type, sqe.sqe_type, sq.sq_id,
            task.position + 1, flags, task.start_ns, task.end_ns,
        )  # fmt: skip

    def completed_dump(self, task: Task) -> None:
        """A dumped task completed on the timeline: its record can be read now."""
        dump = task.dump
        if dump is not None:
            dump.end_ns = task.end_ns
            dump.status = task.status
            self.dump_records.append(dump)
            task.dump = None

    # -- faults ------------------------------------------------------------------------------
    def fault(
        self,
        task: Task,
        code: int,
        error_type: int,
        bits: tuple[str, ...],
        message: str,
        site: FaultSite | None = None,
    ) -> ExceptionRecord:
        """Fail task with code and snapshot its registers and SQE (the first scene of the fault):
        the current PC is the kernel source line of the access (code.pc_of_line)."""
        sqe = task.sqe
        site = site or FaultSite()
        pc = sqe.pc if isinstance(sqe, KernelSqe) else 0
        param = sqe.param if isinstance(sqe, KernelSqe) else 0
        registers = {"pc": pc_of_line(pc, site.line) if pc else 0, "param_base": param}
        registers["block_dim"] = sqe.block_dim
        registers["block_idx"] = site.block_index
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
            block_index=site.block_index,
            block_dim=max(1, sqe.block_dim),
            source=site.source,
            arg_index=site.arg_index,
            arg_name=site.arg_name,
            tensor=site.tensor,
            access_kind=site.access_kind,
            access_address=site.access_address,
            access_size=site.access_size,
            fault_address=site.fault_address,
        )
        self.exceptions.append(record)
        task.status = code
        task.fault = record
        return record

    @staticmethod
    def place_fault(task: Task, heap: list[tuple[int, int]]) -> None:
        """The timeline dispatched a faulted kernel: its faulting block would have started on the
        block_index-th least-loaded core of the task's kind (as blocks are placed)."""
        record = task.fault
        if record is not None and heap:
            order = heapq.nsmallest(record.block_index % len(heap) + 1, heap)
            record.core_id = order[-1][1]

    def timed_out(self, task: Task, heap: list[tuple[int, int]], start: int, first_core: int) -> int:
        """A kernel ran past the execute limit (aclrtSetOpExecuteTimeOut): the task scheduler
        kills it at start + limit, freeing its cores then. Returns the kill time."""
        at = start + self.execute_limit_ns
        for index, (free_at, core) in enumerate(heap):
            if free_at > at:
                heap[index] = (at, core)
        heapq.heapify(heap)
        sqe = task.sqe
        vector = isinstance(sqe, KernelSqe) and sqe.core_kind == CoreKind.AIVEC
        code = ErrorCode.RT_VECTOR_CORE_TIMEOUT if vector else ErrorCode.RT_AICORE_TIMEOUT
        limit_s = self.execute_limit_ns / 1e9
        message = f"kernel execute timeout: still running {limit_s:g} s after it started (aclrtSetOpExecuteTimeOut)"
        record = self.fault(task, int(code), ErrorType.AICORE, ("AIC_TASK_TIMEOUT",), message)
        record.core_id = first_core
        if self.exception_dump and self.read_tensors is not None:
            task.dump = self.read_tensors(task)  # a timeout is exception-dumped, as CANN does
        return at

    def wait_timed_out(self, task: Task) -> None:
        """An event wait blocked past the op wait timeout (aclrtSetOpWaitTimeout): the task
        scheduler fails it with ACL_ERROR_RT_TASK_TIMEOUT."""
        limit_s = self.wait_limit_ns / 1e9
        event = getattr(task.sqe, "event_id", -1)
        message = (
            f"event wait timeout: event {event} not recorded {limit_s:g} s after the wait began (aclrtSetOpWaitTimeout)"
        )
        self.fault(task, int(ErrorCode.RT_TASK_TIMEOUT), ErrorType.OTHERS, ("EVENT_WAIT_TIMEOUT",), message)

    def read_overflow_status(self) -> bytes:
        """The 64 bytes aclrtGetOverflowStatus copies out: the flags in the first 8 (little-endian)."""
        return self.overflow_status.to_bytes(8, "little") + bytes(OVERFLOW_STATUS_BYTES - 8)

    # -- host callbacks ----------------------------------------------------------------------
    def post_callback(self, task: Task, callback_id: int) -> None:
        """Report a callback task to the host (the driver routes it to the subscribed thread)."""
        token = self._next_token
        self._next_token += 1
        self._callbacks[token] = task
        if self.callback_sink is not None:
            sqe = task.sqe
            self.callback_sink(self.device_id, task.sq.sq_id, sqe.stream_id, task.task_id, callback_id, token)

    def take_callback(self, token: int) -> Task:
        """The callback task behind token (KeyError if unknown or already finished)."""
        return self._callbacks.pop(token)
