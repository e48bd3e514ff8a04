"""The modelled task scheduler: a deterministic discrete-event timeline of one device.

Events sit in a heap keyed by (time, kind, sequence). At each instant the scheduler dispatches the
head task of every ready SQ in (priority, sq id) order: kernels take the least-loaded cores of
their kind (logical blocks -> physical core ids), copies take an SDMA engine, event waits resolve
against the device's event slots. Decisions are committed only up to a bound (the host clock, or
a host wait's deadline), so the same single-threaded program gives the same timestamps every run.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING

from cannrt.abi import WR_CQE, ErrorType, EventMode, EventSqe, SqeType
from cannrt.device.engines import COMPLETE, Engines
from cannrt.device.engines import MAX_TASK_NS as MAX_TASK_NS  # where callers have found it
from cannrt.errors import ErrorCode

if TYPE_CHECKING:
    from cannrt.config import Settings
    from cannrt.device.fabric import Fabric
    from cannrt.device.queues import SubmissionQueue
    from cannrt.device.records import TaskLog
    from cannrt.device.reports import Reports
    from cannrt.device.sync import DeviceSync
    from cannrt.device.task import Task

ARRIVE = 1
RESOURCE = 2
WAIT_EXPIRED = 3  # an event wait reached its op wait timeout (aclrtSetOpWaitTimeout)
NEVER = 1 << 62
CLOCK_LIMIT = 1 << 61  # a task due to start past this (73 years) fails: the clock keeps its range
ARRIVAL_JUMP = True  # a lone SQ's later head moves the clock there at once, not via ARRIVE (tests compare)
_KERNEL = int(SqeType.KERNEL)
_AICPU = int(SqeType.AICPU)
_KERNELS = (_KERNEL, _AICPU)
_SDMA = int(SqeType.SDMA)
_EVENT_WAIT = int(SqeType.EVENT_WAIT)
_PLACE_HOLDER = int(SqeType.PLACE_HOLDER)
_SLOT_WRITES = (int(SqeType.EVENT_RECORD), int(SqeType.WRITE_VALUE))


_dispatch_order = attrgetter("priority", "sq_id")  # among SQs ready at one instant: most urgent, lowest id
CALLBACK_PATIENCE_S = 1.0  # wall s a callback's modelled end waits for its host function, then it is parked


class Timeline(Engines):
    """The deterministic model of one device's task scheduler and engines."""

    def __init__(self, device_id: int, settings: Settings, fabric: Fabric, reports: Reports, sync: DeviceSync) -> None:
        super().__init__(settings)
        self.device_id = device_id
        self._fabric = fabric
        self._reports = reports
        self._sync = sync
        self.now = 0
        self._heap: list[tuple[int, int, int, object]] = []
        self._seq = 0
        self.slots: dict[int, tuple[int, int]] = {}  # event id -> (value, timestamp ns)
        self._ready: set[SubmissionQueue] = set()
        self._event_waiters: dict[int, set[SubmissionQueue]] = {}
        self._resource_waiters: set[SubmissionQueue] = set()
        self._resource_wake = NEVER
        self.records: TaskLog | None = None
        self._parked_callbacks: set[Task] = set()  # reached their end before the host ran them
        self._wait_deadlines: set[Task] = set()  # blocked event waits with a WAIT_EXPIRED pending
        self._bound = 0  # of the advance in progress

    # -- driving the clock -------------------------------------------------------------------
    def next_time(self) -> int:
        """Time of the next pending event (NEVER if none)."""
        return self._heap[0][0] if self._heap else NEVER

    def advance(self, bound: int, until: Callable[[], bool] | None = None) -> bool:
        """Process instants up to bound; stop early once `until` holds. Returns until's value.
        Device lock held; one thread at a time drives the scheduler (it waits for its turn)."""
        sync = self._sync
        if sync.scheduling:
            sync.claim_scheduler()
        else:
            sync.scheduling = True
        try:
            return self._advance(bound, until)
        finally:
            if self.records is not None:
                self.records.settle()
            sync.release_scheduler()

    def _advance(self, bound: int, until: Callable[[], bool] | None) -> bool:
        heap = self._heap
        ready = self._ready
        pop, complete, dispatch, lone = heapq.heappop, self._complete, self._dispatch, self._lone_kernels
        self._bound = bound
        while True:
            if ready:
                reached = lone(until) if len(ready) == 1 and not heap else None
                if reached is not None:
                    return reached
                if ready:
                    dispatch()
            if until is not None and until():
                return True
            if not heap or heap[0][0] > bound:
                return False
            now = self.now = heap[0][0]
            while heap and heap[0][0] == now:
                _, kind, _, item = pop(heap)
                if kind == COMPLETE:
                    complete(item)  # type: ignore[arg-type]
                elif kind == ARRIVE:
                    ready.add(item)  # type: ignore[arg-type]
                elif kind == WAIT_EXPIRED:
                    self._expire_wait(item)  # type: ignore[arg-type]
                else:  # RESOURCE: an engine freed up for the SQs parked waiting for one
                    self._resource_wake = NEVER
                    ready.update(self._resource_waiters)
                    self._resource_waiters.clear()

    def _lone_kernels(self, until: Callable[[], bool] | None) -> bool | None:
        """_advance while one SQ is ready, nothing else pending and its head a kernel that ran
        for real: start it, check `until`, complete it at its end, next (the general loop's steps
        without _dispatch, _try_head and the heap). None: the general loop goes on from here."""
        heap, ready, bound = self._heap, self._ready, self._bound
        (sq,) = ready
        queue, try_kernel, complete = sq.model_queue, self._try_kernel, self._complete
        while len(ready) == 1 and sq in ready and not sq.model_busy and queue and not sq.closed and not heap:
            task = queue[0]
            if task.sqe.sqe_type not in _KERNELS or not task.real_done or task.discarded or task.arrival_ns > bound:
                return None  # _try_head's other cases
            if task.arrival_ns > self.now:  # nothing else is pending: move there, as _try_head does
                if not ARRIVAL_JUMP:
                    return None
                self.now = task.arrival_ns
            if self.now > CLOCK_LIMIT:
                return None
            ready.clear()  # as _dispatch pops it
            end = try_kernel(sq, task, False)  # touches neither ready nor the heap but to park
            if end < 0:
                return None  # parked for a core
            if until is not None and until():
                self._push(end, COMPLETE, task)  # where the general loop leaves it
                return True
            if end > bound:
                self._push(end, COMPLETE, task)
                return False
            self.now = end
            complete(task)  # back in ready, nothing pushed
        return None

    def _push(self, time: int, kind: int, item: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, kind, self._seq, item))

    def on_fetched(self, sq: SubmissionQueue) -> None:
        """New tasks reached an SQ: it may have a dispatchable head."""
        if not sq.model_busy:
            self._ready.add(sq)

    def forget(self, sq: SubmissionQueue) -> None:
        """An SQ was destroyed: drop it from every wait list."""
        self._ready.discard(sq)
        self._resource_waiters.discard(sq)
        for waiters in self._event_waiters.values():
            waiters.discard(sq)

    # -- dispatch ----------------------------------------------------------------------------
    def recheck(self, sq: SubmissionQueue) -> None:
        """Real execution discarded a parked wait: look at the SQ again."""
        self._ready.add(sq)

    def _dispatch(self) -> None:
        ready = self._ready
        while ready:
            if len(ready) == 1:
                sq = ready.pop()
                if not sq.model_busy and sq.model_queue and not sq.closed:
                    self._try_head(sq, True)
                continue
            order = sorted(ready, key=_dispatch_order)
            ready.clear()
            for sq in order:
                if not sq.model_busy and sq.model_queue and not sq.closed:
                    self._try_head(sq)

    def _try_head(self, sq: SubmissionQueue, lone: bool = False) -> None:
        """Dispatch the SQ's head task if it can start now. `lone`: no other SQ is being
        dispatched at this instant."""
        task = sq.model_queue[0]
        if task.arrival_ns > self.now:
            if not (lone and ARRIVAL_JUMP) or self._heap or self._ready or task.arrival_ns > self._bound:
                self._push(task.arrival_ns, ARRIVE, sq)
                return
            # nothing else pending before the arrival: move there (as popping a lone ARRIVE would)
            self.now = task.arrival_ns
        kind = task.sqe.sqe_type
        if self.now > CLOCK_LIMIT:
            self._refuse_late(sq, task)
            return
        if kind == _EVENT_WAIT and not (task.real_done and task.discarded):
            self._try_wait(sq, task)
            return
        if kind != _PLACE_HOLDER and not task.real_done:
            self._sync.await_real(task)
        if task.discarded:
            self._start(sq, task, self.now + self.costs.event_ns)
        elif kind in _KERNELS:
            self._try_kernel(sq, task)
        elif kind == _SDMA:
            self._try_copy(sq, task)
        elif kind == _PLACE_HOLDER:
            self._start(sq, task, self.now + self.costs.callback_ns)
        else:
            self._start(sq, task, self.now + self.costs.event_ns)

    def _start(self, sq: SubmissionQueue, task: Task, end: int) -> None:
        sq.model_queue.popleft()
        sq.model_busy = True
        task.start_ns = self.now
        task.end_ns = end
        self._seq += 1
        heapq.heappush(self._heap, (end, COMPLETE, self._seq, task))

    def _park_for_resources(self, sq: SubmissionQueue, free_at: int) -> None:
        self._resource_waiters.add(sq)
        if free_at < self._resource_wake:
            self._resource_wake = free_at
            self._push(free_at, RESOURCE, None)

    def _try_wait(self, sq: SubmissionQueue, task: Task) -> None:
        sqe = task.sqe
        assert isinstance(sqe, EventSqe)
        value = self.slots.get(sqe.event_id, (0, 0))[0]
        ready = value != 0 if sqe.mode == EventMode.BINARY else value >= sqe.value
        if ready:
            task.released = True
            self._wait_deadlines.discard(task)
            self._sync.await_real(task)
            self._start(sq, task, self.now + self.costs.event_ns)
        else:
            self._event_waiters.setdefault(sqe.event_id, set()).add(sq)
            limit = self._reports.wait_limit_ns  # aclrtSetOpWaitTimeout, judged in modelled time
            if limit and task not in self._wait_deadlines:
                self._wait_deadlines.add(task)
                self._push(self.now + limit, WAIT_EXPIRED, task)

    def _expire_wait(self, task: Task) -> None:
        """A blocked event wait ran out of its op wait timeout: it fails, and its stream goes on."""
        if task not in self._wait_deadlines:
            return  # satisfied (or discarded) meanwhile
        self._wait_deadlines.discard(task)
        sq, sqe = task.sq, task.sqe
        assert isinstance(sqe, EventSqe)
        waiters = self._event_waiters.get(sqe.event_id)
        if waiters is not None:
            waiters.discard(sq)
        self._reports.wait_timed_out(task)
        task.released = True  # the worker may pass it now
        self._sync.await_real(task)
        self._start(sq, task, self.now)

    def _refuse_late(self, sq: SubmissionQueue, task: Task) -> None:
        """The clock passed CLOCK_LIMIT: every task fails at once (after its real run, if any)."""
        if not task.status:
            message = f"modelled clock at {self.now} ns, past its range ({CLOCK_LIMIT} ns)"
            self._refuse(task, ErrorCode.RT_TS_ERROR, message, ErrorType.OTHERS)
        if task.sqe.sqe_type != _PLACE_HOLDER and not task.real_done:
            task.released = True  # an event wait runs for real too, so later tasks do
            self._sync.await_real(task)
        self._start(sq, task, self.now)

    # -- completion --------------------------------------------------------------------------
    def _complete(self, task: Task) -> None:
        sq, sqe = task.sq, task.sqe
        kind = sqe.sqe_type
        if kind == _PLACE_HOLDER and not self._sync.await_real(task, CALLBACK_PATIENCE_S):
            # the host has not run it (nobody processes reports?): park its SQ, keep the device going
            self._parked_callbacks.add(task)
            return
        sq.model_busy = False
        sq.model_head = task.position + 1
        if kind in _SLOT_WRITES and not task.discarded:
            self._write_slot(sqe)  # type: ignore[arg-type]  # an EventSqe
        if not sq.closed:
            self._ready.add(sq)
            if task.status or sqe.flags & WR_CQE:
                self._reports.post_completion(task)
        if self.records is not None:
            self.records.pending.append(task)  # its row is written when its advance ends (records.py)
        if task.dump is not None:
            self._reports.completed_dump(task)

    def has_parked_callbacks(self) -> bool:
        """True while a callback reached its end on the timeline but its host function has not run."""
        return bool(self._parked_callbacks)

    def callback_finished(self, task: Task) -> None:
        """A host ran a parked callback's function: it completes at its modelled end (or now, if
        the timeline already moved past it), never at a wall-clock-dependent time."""
        if task in self._parked_callbacks:
            self._parked_callbacks.discard(task)
            task.end_ns = max(task.end_ns, self.now)
            self._push(task.end_ns, COMPLETE, task)

    def _write_slot(self, sqe: EventSqe) -> None:
        current = self.slots.get(sqe.event_id, (0, 0))[0]
        timeline = sqe.sqe_type == SqeType.EVENT_RECORD and sqe.mode == EventMode.TIMELINE
        if not timeline or sqe.value > current:
            self.slots[sqe.event_id] = (sqe.value, self.now)
        waiters = self._event_waiters.pop(sqe.event_id, None)
        if waiters:
            self._ready.update(waiters)
