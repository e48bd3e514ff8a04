"""The real execution of fetched tasks: numpy work, copies, event slots, host callbacks.

Runs eagerly on a device worker thread in any order that respects stream order and event waits,
so host Python work overlaps device compute in wall time. Modelled time is not decided here.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import (
    DUMP,
    CallbackSqe,
    CopyKind,
    CoreKind,
    DumpMode,
    DumpRecord,
    ErrorType,
    KernelSqe,
    SdmaOp,
    SdmaSqe,
    SqeType,
)
from cannrt.device.access_site import SourceLine, caller_line, line_of_traceback
from cannrt.device.copies import copy_parts, host_array
from cannrt.device.dumps import capture, exception_dump, input_dump, new_dump, writes_an_input
from cannrt.device.fabric import Fabric
from cannrt.device.kernel_faults import (
    argument_message,
    argument_site,
    misaligned_site,
    overflow_bits,
    overflow_site,
    saturate,
)
from cannrt.device.memory import DeviceFault
from cannrt.device.reports import FaultSite
from cannrt.device.task import Task
from cannrt.device.views import ArgumentFault, ArgumentViews
from cannrt.errors import ErrorCode
from cannrt.kernels.nn.team import never_lead

if TYPE_CHECKING:
    from cannrt.device.fetcher import Fetcher
    from cannrt.device.queues import SubmissionQueue
    from cannrt.device.reports import Reports
    from cannrt.device.sync import DeviceSync
    from cannrt.device.timeline import Timeline

AICORE_EXCEPTION = int(ErrorCode.RT_AICORE_EXCEPTION)
AICORE_OVER_FLOW = int(ErrorCode.RT_AICORE_OVER_FLOW)
AIVEC_OVER_FLOW = int(ErrorCode.RT_AIVEC_OVER_FLOW)
VECTOR_CORE_EXCEPTION = int(ErrorCode.RT_VECTOR_CORE_EXCEPTION)
SYS_DMA = int(ErrorCode.RT_SYS_DMA)
KERNEL_LOOKUP = int(ErrorCode.RT_KERNEL_LOOKUP)
TASK_TYPE_NOT_SUPPORT = int(ErrorCode.RT_TASK_TYPE_NOT_SUPPORT)
_EVENT_WAIT = int(SqeType.EVENT_WAIT)
_DUMP_INPUTS = int(DumpMode.INPUTS)
_DUMP_OUTPUTS = int(DumpMode.OUTPUTS)
_KERNEL_TYPES = (int(SqeType.KERNEL), int(SqeType.AICPU))
_SDMA = int(SqeType.SDMA)
_PLACE_HOLDER = int(SqeType.PLACE_HOLDER)
_SLOT_TYPES = (int(SqeType.EVENT_RECORD), int(SqeType.EVENT_WAIT), int(SqeType.WRITE_VALUE))
QUIET_S = 0.0005  # a gap between doorbells this long means the host stopped submitting
IDLE_S = 0.2


class Executor:
    """Runs tasks for real on one worker thread per device."""

    def __init__(
        self,
        device_id: int,
        fetcher: Fetcher,
        fabric: Fabric,
        reports: Reports,
        timeline: Timeline,
        sync: DeviceSync,
    ) -> None:
        self.device_id = device_id
        self._fetcher = fetcher
        self._fabric = fabric
        self._values_of = ArgumentViews(fabric).of  # kernel arguments as views, kept per mapping
        self._reports = reports
        self._timeline = timeline
        self._sync = sync
        self.stopping = False
        self.blocked_sqs: dict[int, Task] = {}  # sq id -> blocking callback the host has not finished
        # one thread at a time runs tasks: the worker, or a host thread that waits for results
        self._run_lock = threading.Lock()
        self._fp_flags = 0  # float exception flags the running kernel raised (numpy's bits)
        self._fp_line: SourceLine | None = None  # the kernel line that raised the first of them
        self.thread = threading.Thread(target=self._loop, name=f"npu{device_id}-worker", daemon=True)

    def start(self) -> None:
        """Start the worker thread."""
        self.thread.start()

    def stop(self) -> None:
        """Stop the worker thread (pending work is abandoned)."""
        self.stopping = True
        self._sync.wake.set()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        """Run work when the host waits for it or stops submitting (no doorbell for QUIET_S).

        While the host is busy submitting, the worker stays out of its way: on a real chip the
        device's work costs the host no CPU, here it shares the interpreter with the host. A
        host thread that waits for a result runs the work itself (run_waiting): the worker steps
        aside, and its kernels never start a thread team (kernels/nn/team.py says why).
        """
        never_lead()
        with self._float_flags():
            self._serve()

    def _serve(self) -> None:
        sync, fetcher = self._sync, self._fetcher
        wake = sync.wake
        seen = -1
        while not self.stopping:
            rung = fetcher.submitted()
            if rung != seen:
                seen = rung
                wake.wait(QUIET_S)
                wake.clear()
                continue
            fetcher.fetch_all()
            if not sync.host_awaits():
                with self._run_lock:  # until the host submits again or waits for a result
                    progressed = self._drain_all(None if sync.host_waiters else fetcher.doorbells, step_aside=True)
                if sync.host_awaits():  # it stepped aside: the waiting thread runs the rest
                    with sync.lock:
                        sync.lock.notify_all()
                elif progressed:
                    continue
            sync.idle = True
            if not fetcher.has_unfetched():
                wake.wait(IDLE_S)
            wake.clear()
            sync.idle = False
            seen = -1

    def run_waiting(self) -> bool:
        """Run what can run now on the calling host thread, which waits for real results with
        the device lock held (released meanwhile, as a wait would): instead of handing the GIL
        back and forth with the worker. False if nothing ran (or the worker is running tasks)."""
        if not self._run_lock.acquire(blocking=False):
            return False
        lock = self._sync.lock
        lock.release()
        try:
            with self._float_flags():  # as on the worker thread
                return self._drain_all()
        finally:
            self._run_lock.release()  # before the device lock: the worker takes them in this order
            lock.acquire()

    def _float_flags(self) -> np.errstate:
        """Like the vector unit: a float exception gives inf or nan, no warning, and sets a
        status flag (the callback runs only when a flag is raised)."""
        return np.errstate(all="call", under="ignore", call=self._float_flag)

    def _float_flag(self, _kind: str, flag: int) -> None:
        if not self._fp_flags:
            self._fp_line = caller_line()
        self._fp_flags |= flag

    def _drain_all(self, doorbells: deque[SubmissionQueue] | None = None, step_aside: bool = False) -> bool:
        """Run what is runnable on every SQ; True if anything ran. With the doorbell list, stop
        once it holds a doorbell: the host is submitting again, and the worker keeps out of its
        way (both share one interpreter; taking turns at the GIL costs each of them). With
        step_aside, stop once a host thread waits for a result (it runs the rest)."""
        progressed = False
        for sq in self._fetcher.sq_list:
            progressed |= self._drain(sq, doorbells, step_aside)
        return progressed

    def _drain(self, sq: SubmissionQueue, doorbells: deque[SubmissionQueue] | None, step_aside: bool) -> bool:
        """Run the head tasks of one SQ while they are runnable (and no doorbell rang, if
        watched; and no host thread waits for a result, if watched); True if any ran."""
        queue = sq.real_queue
        if not queue:
            return False
        blocked, run, take, sync = self.blocked_sqs, self._run, queue.popleft, self._sync
        ran = False
        while queue:
            if (blocked and sq.sq_id in blocked) or doorbells or (step_aside and sync.host_awaits()):
                break
            task = queue[0]
            if task.sqe.sqe_type == _EVENT_WAIT and not self._wait_released(task):
                break
            take()
            run(task)
            ran = True
        return ran

    @staticmethod
    def _wait_released(task: Task) -> bool:
        """An event wait runs once the task scheduler (the timeline) released it: which record it
        consumes is decided in modelled time, where resets and re-records really happen."""
        return task.released or task.discarded or bool(task.sq.failed_code)

    def _run(self, task: Task) -> None:
        sq = task.sq
        if sq.failed_code and not task.discarded:
            task.discarded = True
            task.status = sq.failed_code
        kind = task.sqe.sqe_type
        if not task.discarded:
            if kind in _KERNEL_TYPES:
                self._run_kernel(task)
            else:
                self._execute(task)
            if task.status and sq.stop_on_error and not sq.failed_code:
                sq.failed_code = task.status
        blocked = self.blocked_sqs
        if blocked and blocked.get(sq.sq_id) is task:
            return  # a blocking callback: it finishes when the host has run it
        if kind == _PLACE_HOLDER or task.discarded:
            self._finished(task)
            return
        task.real_done = True  # what _finished does for any other task, inline
        if task is self._sync.awaited:
            self._sync.ran(task)

    def _finished(self, task: Task) -> None:
        """The task ran for real: tell the scheduler where it waits for that."""
        task.real_done = True
        kind = task.sqe.sqe_type
        sync = self._sync
        if kind == _PLACE_HOLDER:
            with sync.lock:
                self._timeline.callback_finished(task)
                sync.lock.notify_all()
            return
        if task.discarded and kind == _EVENT_WAIT:
            with sync.lock:
                self._timeline.recheck(task.sq)
        sync.ran(task)

    def _execute(self, task: Task) -> None:
        """A task other than a kernel."""
        sqe = task.sqe
        kind = sqe.sqe_type
        if kind == _SDMA:
            self._run_sdma(task)
        elif kind == _PLACE_HOLDER:
            assert isinstance(sqe, CallbackSqe)
            if sqe.block:
                self.blocked_sqs[task.sq.sq_id] = task
            self._reports.post_callback(task, sqe.callback_id)
        elif kind not in _SLOT_TYPES:  # event slots live on the timeline
            task.status = TASK_TYPE_NOT_SUPPORT

    def callback_done(self, task: Task) -> None:
        """The host finished a blocking callback: release the stream."""
        self.blocked_sqs.pop(task.sq.sq_id, None)
        self._finished(task)
        self._sync.wake.set()

    def _run_kernel(self, task: Task) -> None:
        sqe: KernelSqe = task.sqe  # type: ignore[assignment]  # a KERNEL or AICPU SQE
        kernel = task.kernel
        if kernel is None:
            self._fail(task, KERNEL_LOOKUP, ErrorType.AICORE, ("CCU_ILLEGAL_INSTR",), "no kernel at this PC")
            return
        try:
            values, scatter = self._values_of(task.sq.asid, task.args, kernel.outputs)
        except ArgumentFault as failed:
            self._argument_fault(task, sqe, failed)
            return
        reports = self._reports
        dump_mode = reports.dump_mode if sqe.flags & DUMP else 0
        if dump_mode:
            task.dump = new_dump(self.device_id, task, kernel.name)
            if dump_mode & _DUMP_INPUTS:
                capture(task.dump, task.args, values, kernel.outputs, "input")
        before = None
        if reports.overflow_dump and writes_an_input(task.args, kernel.outputs):  # in case it overflows:
            before = input_dump(self.device_id, task, kernel.name, values)  # the inputs, as they were
        self._fp_flags = 0
        try:
            kernel.compute(*values)
            if self._fp_flags:
                self._float_exception(task, sqe, values, before)
            for gathered, parts in scatter:
                copy_parts([gathered.reshape(-1).view(np.uint8)], parts)
        except Exception as exc:  # a kernel's own bug is an AI Core exception, not a crash
            self._kernel_raised(task, sqe, exc)
            return
        if dump_mode & _DUMP_OUTPUTS and task.dump is not None:
            capture(task.dump, task.args, values, kernel.outputs, "output")

    def _argument_fault(self, task: Task, sqe: KernelSqe, failed: ArgumentFault) -> None:
        """The MMU refused a tensor argument (or its address is misaligned for its dtype)."""
        assert task.kernel is not None
        fault = failed.fault
        if failed.misaligned:
            site = misaligned_site(task.kernel, task.args, sqe.block_dim, failed.index, fault.kind == "write")
            bits: tuple[str, ...] = ("MTE_ERR_ADDR_MISALIGN",)
        else:
            site = argument_site(task.kernel, task.args, sqe.block_dim, failed.index, fault)
            bits = ("MTE_WRITE_OVERFLOW",) if fault.kind == "write" else ("MTE_READ_OVERFLOW",)
        message = argument_message(fault, str(failed), failed.misaligned, site)
        self._fail(task, self._core_error(sqe), ErrorType.AICORE, bits, message, site)
        self._exception_dump(task)

    def _float_exception(self, task: Task, sqe: KernelSqe, values: list[object], before: DumpRecord | None) -> None:
        """The kernel raised float flags: the overflow status register keeps them; saturation
        mode clamps the outputs; with overflow detection on, the task fails (207016 on the
        vector cores, 207003 on the AI cores) and, in the "overflow" dump mode, is dumped."""
        kernel = task.kernel
        assert kernel is not None
        flags, line = self._fp_flags, self._fp_line
        self._fp_flags, self._fp_line = 0, None
        reports = self._reports
        reports.overflow_status |= flags
        if not reports.overflow_check:
            if reports.saturation:
                saturate(kernel, values)
            return
        site = overflow_site(kernel, task.args, values, sqe.block_dim, line)
        if reports.saturation:
            saturate(kernel, values)
        code = AIVEC_OVER_FLOW if sqe.core_kind == CoreKind.AIVEC else AICORE_OVER_FLOW
        bits = overflow_bits(flags)
        what = "division by zero" if "VEC_DIV0" in bits else "float overflow (inf/nan)"
        self._fail(task, code, ErrorType.AICORE, bits, f"{what} in {kernel.name}: overflow detection", site)
        if reports.overflow_dump:  # the inputs (as they were if the kernel wrote over them) and outputs
            if before is None:
                before = input_dump(self.device_id, task, kernel.name, values)
            capture(before, task.args, values, kernel.outputs, "output")
            task.dump = before

    def _kernel_raised(self, task: Task, sqe: KernelSqe, exc: Exception) -> None:
        """The kernel's own code raised: an AI Core error with an exception dump."""
        line = line_of_traceback(exc.__traceback__)
        site = FaultSite(source=str(line) if line else "", line=line.line if line else 0)
        self._fail(task, self._core_error(sqe), ErrorType.AICORE, ("CCU_ILLEGAL_INSTR",), repr(exc), site)
        self._exception_dump(task)

    def tensors_of(self, task: Task) -> DumpRecord | None:
        """An exception dump of a kernel task: what can be read of its tensors now."""
        if task.kernel is None:
            return None
        return exception_dump(self.device_id, task, self._fabric.space(task.sq.asid))

    def _exception_dump(self, task: Task) -> None:
        """On an AI Core error keep what can be read of every tensor argument (exception dump)."""
        if self._reports.exception_dump:
            task.dump = self.tensors_of(task)

    @staticmethod
    def _core_error(sqe: KernelSqe) -> int:
        return VECTOR_CORE_EXCEPTION if sqe.core_kind == CoreKind.AIVEC else AICORE_EXCEPTION

    def _run_sdma(self, task: Task) -> None:
        sqe = task.sqe
        assert isinstance(sqe, SdmaSqe)
        try:
            if sqe.op == SdmaOp.MEMSET and sqe.kind == CopyKind.HOST_TO_HOST:
                host_array(sqe.dst, sqe.length)[...] = sqe.memset_value
            elif sqe.op == SdmaOp.MEMSET:
                for part in self._device_parts(task, sqe.dst, sqe.length, "write"):
                    part[...] = sqe.memset_value
            else:
                self._copy(task, sqe)
        except DeviceFault as fault:
            self._fail(task, SYS_DMA, ErrorType.MEMORY, ("SDMA_ADDR_ERROR",), str(fault))

    def _copy(self, task: Task, sqe: SdmaSqe) -> None:
        if CopyKind(sqe.kind).reads_host:
            source = [host_array(sqe.src, sqe.length)]
        else:
            source = self._device_parts(task, sqe.src, sqe.length, "read")
        if CopyKind(sqe.kind).writes_host:
            target = [host_array(sqe.dst, sqe.length)]
        else:
            target = self._device_parts(task, sqe.dst, sqe.length, "write")
        copy_parts(source, target)

    def _device_parts(self, task: Task, address: int, nbytes: int, kind: str) -> list[np.ndarray]:
        space = self._fabric.resolve(address, task.sq.asid, self.device_id, kind, nbytes)
        return space.segments(address, nbytes, kind)

    def _fail(
        self, task: Task, code: int, error_type: int, bits: tuple[str, ...], message: str, site: FaultSite | None = None
    ) -> None:
        self._reports.fault(task, code, error_type, bits, message, site)


__all__ = ["Executor"]
