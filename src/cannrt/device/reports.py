"""The device's report path: completion reports into CQs, fault snapshots, dump records and host
callback reports (what the runtime receives through the driver)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.abi import CQE_DISCARDED, SQE_WORDS, DumpRecord, ExceptionRecord, KernelSqe
from cannrt.device.queues import CompletionQueue

if TYPE_CHECKING:
    from cannrt.device.task import Task

CallbackSink = Callable[[int, int, int, int, int, int], None]  # dev, sq, stream, task, callback, token
FAULT_PC_OFFSET = 0x40  # the modelled instruction that faulted: entry + 0x40 + 8 per argument read
FAULT_PC_STRIDE = 8


class Reports:
    """Everything the device reports upward, in the order the timeline completes tasks."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.cqs: dict[int, CompletionQueue] = {}
        self.exceptions: list[ExceptionRecord] = []
        self.dump_mode = 0  # DumpMode bits: tensors captured for kernels whose SQE carries the DUMP flag
        self.exception_dump = False  # keep a failing kernel's tensors
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
        error_type = task.fault.error_type if task.fault else 0
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
        self, task: Task, code: int, error_type: int, bits: tuple[str, ...], message: str, arg_index: int = 0
    ) -> ExceptionRecord:
        """Fail task with code and snapshot its registers and SQE (the first scene of the fault)."""
        sqe = task.sqe
        pc = sqe.pc if isinstance(sqe, KernelSqe) else 0
        param = sqe.param if isinstance(sqe, KernelSqe) else 0
        registers = {"pc": pc + FAULT_PC_OFFSET + FAULT_PC_STRIDE * arg_index, "param_base": param}
        registers["block_dim"] = sqe.block_dim
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
        task.status = code
        task.fault = record
        return record

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
