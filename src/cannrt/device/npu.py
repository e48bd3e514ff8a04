"""One simulated NPU: its parts wired once, and the register interface the driver programs.

Parts (each gets its collaborators through its constructor; none holds the whole):
HBM (physical pages), KernelCode (PCs), Reports (CQs, faults, dumps, callbacks), DeviceSync (the
lock and handshakes), Timeline (the modelled task scheduler), Fetcher (SQs, doorbells, decode)
and Executor (the real worker). The device knows nothing above the driver: it is handed bytes
and integers, and host time as an integer (it never reads a host clock).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from cannrt.abi import DumpMode, DumpRecord, EventMode, ExceptionRecord, TaskRecord
from cannrt.abi.records import TaskSink
from cannrt.config import Settings
from cannrt.device.code import KernelCode
from cannrt.device.executor import Executor
from cannrt.device.fabric import Fabric
from cannrt.device.fetcher import Fetcher
from cannrt.device.memory import Hbm
from cannrt.device.queues import SubmissionQueue
from cannrt.device.records import TaskLog
from cannrt.device.reports import CallbackSink, Reports
from cannrt.device.sync import DeviceHang, DeviceSync
from cannrt.device.timeline import NEVER, Timeline

STUCK_GRACE_S = 0.05  # wall time a bounded host wait gives other host threads before timing out
HOST_WORK_GRACE_S = 1.0  # the same while a reported callback still runs on a host thread


class Npu:
    """The simulated chip: everything below the driver."""

    def __init__(self, device_id: int, settings: Settings, fabric: Fabric) -> None:
        self.device_id = device_id
        self.settings = settings
        self.hbm = Hbm(settings.chip.hbm_bytes)
        self.code = KernelCode()
        self.reports = Reports(device_id)
        self.sync = DeviceSync(settings.watchdog_s)
        self.timeline = Timeline(device_id, settings, fabric, self.reports, self.sync)
        self.fetcher = Fetcher(self.code, fabric, self.reports, self.sync, self.timeline.on_fetched)
        self.executor = Executor(device_id, self.fetcher, fabric, self.reports, self.timeline, self.sync)
        self.sync.run_waiting = self.executor.run_waiting  # a waiting host thread runs real work too
        self.reports.read_tensors = self.executor.tensors_of  # exception dumps the timeline decides
        self.executor.start()

    # -- queues ------------------------------------------------------------------------------
    def create_sq(self, sq_id: int, stream_id: int, asid: int, priority: int, cq_id: int) -> SubmissionQueue:
        """Bring up an SQ bound to a stream and a CQ; returns the ring the driver maps."""
        sq = SubmissionQueue(sq_id, self.settings.chip.sq_depth, stream_id, asid, priority, cq_id)
        with self.sync.lock:
            self.fetcher.add(sq)
        return sq

    def destroy_sq(self, sq_id: int, discard: bool) -> None:
        """Tear down an SQ; with discard, tasks not yet run are dropped (destroy_force)."""
        with self.sync.lock:
            self.sync.claim_scheduler()  # not while another thread's scheduling looks at its head
            try:
                sq = self.fetcher.remove(sq_id)
                if discard:
                    for task in sq.real_queue:
                        task.discarded = True
                    sq.model_queue.clear()
                self.timeline.forget(sq)
            finally:
                self.sync.release_scheduler()

    def create_cq(self, cq_id: int) -> None:
        """Bring up a completion queue."""
        self.reports.create_cq(cq_id)

    def set_stop_on_error(self, sq_id: int, stop: bool) -> None:
        """Failure mode of an SQ: stop-on-error discards tasks after the first failure."""
        self.fetcher.sqs[sq_id].stop_on_error = stop

    def doorbell_register(self) -> tuple[deque[SubmissionQueue], DeviceSync]:
        """What the driver maps with each SQ: the doorbell list (append an SQ after moving its
        tail, unless sq.rung says it is there already) and the flags that say who to wake."""
        return self.fetcher.doorbells, self.sync

    def wait_for_ring_space(self, sq: SubmissionQueue) -> None:
        """Block until sq has a free entry (a full ring is where a device behind its host makes
        the host wait)."""
        self.fetcher.wait_for_space(sq)

    # -- kernels, events, callbacks ----------------------------------------------------------
    def load_kernel(self, name: str) -> int:
        """Place a registered kernel's code; returns its entry PC (KeyError if unknown)."""
        return self.code.load(name)

    def clear_event_slot(self, event_id: int) -> None:
        """A reused event id starts from zero in both views."""
        with self.sync.lock:
            self.timeline.slots.pop(event_id, None)

    def set_callback_sink(self, sink: CallbackSink) -> None:
        """Where callback reports go."""
        self.reports.callback_sink = sink

    def callback_done(self, token: int) -> None:
        """The host ran a callback's function."""
        self.executor.callback_done(self.reports.take_callback(token))

    # -- host-visible state on the modelled timeline ----------------------------------------
    def catch_up(self, now_ns: int) -> None:
        """Commit the timeline up to host time now_ns (what the host could observe by then)."""
        with self.sync.lock:
            self.fetcher.drain()
            self.timeline.advance(now_ns)

    def sq_head(self, sq_id: int, now_ns: int) -> int:
        """Tasks of the SQ completed by host time now_ns."""
        self.catch_up(now_ns)
        return self.fetcher.sqs[sq_id].model_head

    def event_slot(self, event_id: int, now_ns: int) -> tuple[int, int]:
        """(value, timestamp ns) of an event slot as of host time now_ns."""
        self.catch_up(now_ns)
        return self.timeline.slots.get(event_id, (0, 0))

    def take_reports(self, cq_id: int, count: int, now_ns: int) -> bytes:
        """Up to count completion reports posted by host time now_ns (packed CQEs)."""
        self.catch_up(now_ns)
        return self.reports.cqs[cq_id].take(count)

    def exceptions(self, start: int) -> list[ExceptionRecord]:
        """Fault records from index start."""
        return self.reports.exceptions[start:]

    # -- host waits --------------------------------------------------------------------------
    def sq_done(self, sq_id: int, position: int) -> Callable[[], bool]:
        """A condition: the SQ's head reached position (or the SQ closed)."""
        sq = self.fetcher.sqs[sq_id]
        return lambda: sq.model_head >= position or sq.closed

    def idle(self) -> bool:
        """Every SQ of the device is drained on the modelled timeline."""
        return all(sq.model_head >= sq.tail for sq in self.fetcher.sq_list)

    def event_reached(self, event_id: int, value: int, mode: int) -> Callable[[], bool]:
        """A condition on an event slot (TIMELINE: >= value; BINARY: != 0)."""
        slots = self.timeline.slots

        def reached() -> bool:
            current = slots.get(event_id, (0, 0))[0]
            return current != 0 if mode == EventMode.BINARY else current >= value

        return reached

    def cq_nonempty(self, cq_id: int) -> Callable[[], bool]:
        """A condition: the CQ holds a report (the completion interrupt)."""
        cq = self.reports.cqs[cq_id]
        return lambda: bool(cq.reports)

    def wait_until(self, done: Callable[[], bool], now_ns: int, timeout_ns: int | None) -> tuple[bool, int]:
        """A host wait from host time now_ns: the timeline runs ahead until done() or the modelled
        deadline passes. Returns (done, the host time the wait ends at); DeviceHang after the
        wall-clock watchdog when nothing can make progress."""
        deadline = NEVER if timeout_ns is None or timeout_ns < 0 else now_ns + timeout_ns
        wall_limit = time.monotonic() + self.settings.watchdog_s
        sync = self.sync
        with sync.lock:
            sync.host_waiters += 1
            try:
                reached, at = self._wait_locked(done, deadline, wall_limit)
            finally:
                sync.host_waiters -= 1
        return reached, max(now_ns, at)

    def _wait_locked(self, done: Callable[[], bool], deadline: int, wall_limit: float) -> tuple[bool, int]:
        timeline, fetcher, sync = self.timeline, self.fetcher, self.sync
        give_up_at = wall_limit  # a bounded wait with nothing pending gives other threads a grace
        graced = False
        while True:
            if fetcher.doorbells:
                graced = False  # new work arrived: a fresh grace if it does not help
                fetcher.drain()
            if timeline.advance(deadline, done):
                return True, timeline.now
            if timeline.next_time() != NEVER:  # the next event lies past the deadline
                return False, deadline
            if deadline != NEVER and not graced:
                grace = HOST_WORK_GRACE_S if timeline.has_parked_callbacks() else STUCK_GRACE_S
                give_up_at, graced = min(wall_limit, time.monotonic() + grace), True
            remaining = give_up_at - time.monotonic()
            if remaining <= 0 and not fetcher.doorbells:
                if deadline != NEVER:
                    return False, deadline
                raise DeviceHang(f"device {self.device_id}: nothing can make progress")
            # woken by a doorbell or by another thread's scheduling (which may have done it all);
            # the grace and the watchdog run from when they started, whatever wakes the wait
            sync.sleep(max(0.0, remaining))

    # -- tracing and dumps -------------------------------------------------------------------
    def trace(self, on: bool, sink: TaskSink | None = None) -> None:
        """Start (or stop) keeping a record of every task; with sink, records go to it a chunk at a
        time as tasks complete."""
        with self.sync.lock:
            if on and (self.timeline.records is None or sink is not None):
                if self.timeline.records is not None:
                    self.timeline.records.flush()  # a new sink: the last log's tasks to its own first
                self.timeline.records = TaskLog(self.device_id, sink)
            elif not on and self.timeline.records is not None:
                self.timeline.records.flush()  # the last tasks to the sink
                self.timeline.records = None

    def take_records(self, now_ns: int) -> list[TaskRecord]:
        """Records kept up to host time now_ns (tracing continues if it was on); with a sink, what
        is kept goes to it and none are returned."""
        self.catch_up(now_ns)
        with self.sync.lock:
            log = self.timeline.records
            return log.records() if log is not None else []

    def configure_dump(self, mode: DumpMode, exception: bool) -> None:
        """Which tensors kernels flagged DUMP capture, and whether faults dump."""
        self.reports.dump_mode = int(mode)
        self.reports.exception_dump = exception

    def set_op_limits(self, execute_ns: int, wait_ns: int, now_ns: int) -> None:
        """From host time now_ns on, kernels fail past execute_ns of modelled run time and event
        waits past wait_ns blocked (0: no limit)."""
        self.catch_up(now_ns)
        with self.sync.lock:
            self.reports.execute_limit_ns = execute_ns
            self.reports.wait_limit_ns = wait_ns

    def configure_overflow(self, check: bool, dump: bool) -> None:
        """Overflow detection (a float exception fails its kernel) and the overflow dump."""
        self.reports.overflow_check = check
        self.reports.overflow_dump = dump

    def set_saturation(self, on: bool) -> None:
        """Saturation mode (aclrtSetDeviceSatMode): inf -> largest finite value, nan -> 0."""
        self.reports.saturation = on

    def overflow_status(self, reset: bool) -> bytes:
        """The overflow status register (64 bytes); reset clears it afterwards."""
        status = self.reports.read_overflow_status()
        if reset:
            self.reports.overflow_status = 0
        return status

    def take_dumps(self, now_ns: int) -> list[DumpRecord]:
        """Dump records of tasks completed by host time now_ns (taken once)."""
        self.catch_up(now_ns)
        with self.sync.lock:
            records, self.reports.dump_records = self.reports.dump_records, []
        return records

    def close(self) -> None:
        """Stop the worker and drop all state (a trace's last tasks go to its sink)."""
        self.executor.stop()
        with self.sync.lock:
            if self.timeline.records is not None:
                self.timeline.records.flush()
