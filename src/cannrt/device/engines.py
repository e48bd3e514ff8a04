"""The engines a dispatched task runs on, in modelled time: the AI cores and vector cores
(kernels: their blocks onto the least-loaded cores of their kind) and the SDMA engines (copies).

The scheduler (Timeline, which derives from Engines) decides when a task is dispatched; Engines
decide where it runs and until when, and start it on the scheduler's heap.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.abi import CoreKind, ErrorType, KernelSqe, SdmaOp, SdmaSqe
from cannrt.device.kernel_costs import KernelCosts
from cannrt.device.l2 import L2Model
from cannrt.device.placement import place
from cannrt.device.task import ONE_BLOCK
from cannrt.errors import ErrorCode

if TYPE_CHECKING:
    from cannrt.config import Settings
    from cannrt.device.fabric import Fabric
    from cannrt.device.queues import SubmissionQueue
    from cannrt.device.records import TaskLog
    from cannrt.device.reports import Reports
    from cannrt.device.task import Task

COMPLETE = 0  # the heap's event kinds: completions first at an instant, so freed resources serve dispatches
MAX_TASK_NS = 1 << 58  # a task longer than this (9 years) fails: ends stay below the scheduler's NEVER
_AIVEC = int(CoreKind.AIVEC)
Ns = tuple[int, ...]


class Engines:
    """The cores and SDMA engines of one device: where a dispatched task runs, until when."""

    # the scheduler's state the engines read and write (Timeline sets it up)
    now: int
    records: TaskLog | None
    _heap: list[tuple[int, int, int, object]]
    _seq: int
    _fabric: Fabric
    _reports: Reports
    _park_for_resources: Callable[[SubmissionQueue, int], None]  # the SQ waits for an engine until then
    _start: Callable[[SubmissionQueue, Task, int], None]  # start the task now, to complete at end

    def __init__(self, settings: Settings) -> None:
        self.chip = settings.chip
        self.costs = settings.device_costs
        cores = self.chip.enabled_cores()
        per_core = self.chip.vector_cores_per_core()
        # per engine kind, a heap of (free at, physical core id): least-loaded first, then lowest id
        self.core_heaps: dict[int, list[tuple[int, int]]] = {
            CoreKind.AICORE: [(0, core) for core in cores],
            CoreKind.AIVEC: [(0, core * per_core + v) for core in cores for v in range(per_core)],
        }
        self.sdma_free = [0] * self.chip.sdma_engines
        self.l2 = L2Model(self.chip.l2_bytes)
        self._costs_of = KernelCosts(self.chip, self.l2).of  # costs per launch shape, cached
        self._one_core = {core: (core,) for heap in self.core_heaps.values() for _, core in heap}
        # the core heap a kernel SQE's core kind (a byte) dispatches to: the vector cores for AIVEC
        aicore, aivec = self.core_heaps[CoreKind.AICORE], self.core_heaps[CoreKind.AIVEC]
        self._heap_of_kind = [aivec if kind == _AIVEC else aicore for kind in range(256)]
        self._dispatch_ns = self.costs.dispatch_ns
        self._kernel_floor_ns = self.costs.kernel_floor_ns
        self._block_launch_ns = self.costs.block_launch_ns

    def _try_copy(self, sq: SubmissionQueue, task: Task) -> None:
        engine = min(range(len(self.sdma_free)), key=lambda e: (self.sdma_free[e], e))
        if self.sdma_free[engine] > self.now:
            self._park_for_resources(sq, self.sdma_free[engine])
            return
        sqe = task.sqe
        assert isinstance(sqe, SdmaSqe)
        gbps = self._fabric.copy_bandwidth(self.chip, sqe.op == SdmaOp.MEMSET, sqe.kind, sqe.src, sqe.dst)
        ns = self.costs.copy_latency_ns + int(sqe.length / gbps)
        if ns > MAX_TASK_NS:
            message = f"copy of {sqe.length} bytes would take {ns} ns (limit {MAX_TASK_NS})"
            self._refuse(task, ErrorCode.RT_SYS_DMA, message, ErrorType.MEMORY)
            ns = 0
        end = self.now + ns
        self.sdma_free[engine] = end
        task.cores = (engine,)
        self._start(sq, task, end)

    def _try_kernel(self, sq: SubmissionQueue, task: Task, push: bool = True) -> int:
        """Start a kernel task on the least-loaded cores of its kind; returns its end, -1 if no
        core is free now (the SQ waits for one). Its completion goes on the heap unless not
        `push` (the caller completes it, or pushes it)."""
        sqe: KernelSqe = task.sqe  # type: ignore[assignment]  # a KERNEL or AICPU SQE
        heap = self._heap_of_kind[sqe.core_kind]
        now = self.now
        free_at, first_core = heap[0]
        if free_at > now:
            self._park_for_resources(sq, free_at)
            return -1
        start = now + self._dispatch_ns
        kernel = task.kernel
        if kernel is None or task.status:
            task.cores = (first_core,)
            task.aux = (None, 0.0, None)
            end = start
        else:
            try:
                block_ns, task.aux = self._costs_of(kernel, task.args, sqe.block_dim or 1, len(heap))  # u16: 0 is 1
            except Exception as exc:  # a user kernel's work model raised: the kernel fails, not the device
                message = f"{kernel.name} work model: {exc!r}"
                end = self._refused_kernel(task, heap, start, ErrorCode.RT_AICORE_EXCEPTION, message)
            else:
                if len(block_ns) == 1 and block_ns[0] <= MAX_TASK_NS:  # one block: the least-loaded core
                    at = start if free_at <= start else free_at  # free by now: by the start (dispatch_ns >= 0)
                    end = at + block_ns[0] if at == start else at + block_ns[0] + self._block_launch_ns
                    heapq.heapreplace(heap, (end, first_core))
                    if self.records is not None:
                        task.blocks, task.block_at, task.block_end = ONE_BLOCK, at, end
                    task.cores = self._one_core[first_core]
                else:
                    end = self._place_blocks(task, kernel.name, heap, start, block_ns)
        limit = self._reports.execute_limit_ns  # aclrtSetOpExecuteTimeOut, judged in modelled time
        if limit and end - start > limit and not task.status:
            end = self._reports.timed_out(task, heap, start, first_core)
        elif task.fault is not None:
            self._reports.place_fault(task, heap)  # the core the faulting block ran on
        floor = start + self._kernel_floor_ns
        if end < floor:
            end = floor
        sq.model_queue.popleft()  # _start, inline
        sq.model_busy = True
        task.start_ns = now
        task.end_ns = end
        if push:
            self._seq += 1
            heapq.heappush(self._heap, (end, COMPLETE, self._seq, task))
        return end

    def _place_blocks(self, task: Task, name: str, heap: list[tuple[int, int]], start: int, block_ns: Ns) -> int:
        """Blocks onto least-loaded cores (earliest free, then lowest id); returns the end and
        sets the task's cores (and blocks, when tracing)."""
        total = sum(block_ns)
        if total > MAX_TASK_NS:
            message = f"{name} would run {total} ns (limit {MAX_TASK_NS})"
            return self._refused_kernel(task, heap, start, ErrorCode.RT_AICORE_TIMEOUT, message)
        end, task.cores, task.blocks = place(heap, block_ns, start, self._block_launch_ns, self.records is not None)
        return end

    def _refuse(self, task: Task, code: int, message: str, error_type: int = ErrorType.AICORE) -> None:
        """Fail a task whose modelled time would leave the clock's range (it takes no time)."""
        self._reports.fault(task, code, error_type, ("TIME_LIMIT",), message)

    def _refused_kernel(self, task: Task, heap: list[tuple[int, int]], start: int, code: int, message: str) -> int:
        self._refuse(task, code, message)
        task.cores = (heap[0][1],)
        task.aux = (None, 0.0, None)
        return start
