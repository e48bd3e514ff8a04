"""The handshakes of one device: host waits, the scheduler and the worker meet on one lock.

The scheduler (modelled time) may need a task's real results before it can commit it; the worker
runs tasks for real on its own thread; host threads wait for modelled progress. DeviceSync holds
the lock they share, the worker's wake-up and the flags each side reads of the other.

One thread at a time drives the scheduler (`claim_scheduler`): a scheduler that waits for real
results releases the device lock meanwhile, and another host thread must not dispatch the same
SQ heads then. Every host thread that sleeps on the lock counts itself in `sleepers`, and the
scheduler's owner wakes them all when it hands the scheduler back: whatever it completed, each
sleeper re-checks its own condition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cannrt.device.task import Task

AWAIT_POLL_S = 0.05  # a waiter re-checks at least this often (the worker notifies too)


class DeviceHang(Exception):
    """A real wait exceeded the wall-clock watchdog."""


class DeviceSync:
    """The device lock, the worker's wake-up, and who waits for what."""

    def __init__(self, watchdog_s: float) -> None:
        self.watchdog_s = watchdog_s
        self.lock = threading.Condition(threading.Lock())
        self.wake = threading.Event()  # set to wake the worker
        self.idle = False  # the worker found nothing to do and sleeps
        self.host_waiters = 0  # host threads inside a wait (guarded by lock)
        self.awaited: Task | None = None  # the task the scheduler waits to see run for real
        self.scheduling = False  # a thread drives the scheduler (guarded by lock)
        self.sleepers = 0  # threads inside lock.wait for modelled progress (guarded by lock)
        # runs what can run on the waiting thread (the worker's, wired by the Npu); False if none
        self.run_waiting: Callable[[], bool] | None = None

    def host_awaits(self) -> bool:
        """A host thread waits for a task's real results and runs what can run itself
        (run_waiting): the worker steps aside meanwhile."""
        return self.awaited is not None and self.run_waiting is not None

    def kick(self) -> None:
        """A doorbell was rung: wake an idle worker and any host thread waiting on the device."""
        if self.idle:
            self.idle = False  # one wake per idle period, however long the burst
            self.wake.set()
        if self.host_waiters:
            with self.lock:
                self.lock.notify_all()

    def ran(self, task: Task) -> None:
        """The worker finished task for real: release the scheduler if it waits for it."""
        if task is self.awaited:
            with self.lock:
                self.lock.notify_all()

    def claim_scheduler(self) -> None:
        """Become the one thread that drives the scheduler (lock held; released while another
        thread drives it, which is bounded by that thread's watchdog)."""
        while self.scheduling:
            self.sleep(AWAIT_POLL_S)
        self.scheduling = True

    def release_scheduler(self) -> None:
        """Hand the scheduler back and wake every sleeper to re-check what it waits for (lock held)."""
        self.scheduling = False
        if self.sleepers:
            self.lock.notify_all()

    def sleep(self, seconds: float) -> bool:
        """Wait on the lock (held; released meanwhile) for a notification or seconds; False on
        a timeout. The scheduler's owner wakes every sleeper when it is done."""
        self.sleepers += 1
        try:
            return self.lock.wait(seconds)
        finally:
            self.sleepers -= 1

    def await_real(self, task: Task, patience_s: float | None = None) -> bool:
        """Block (lock held, released while waiting) until task has run for real, running what
        can run on this thread meanwhile (run_waiting), else waiting for the worker. With a
        patience, give up after that much wall time and return False; without one, a task that
        never runs is a DeviceHang after the watchdog."""
        if task.real_done:
            return True
        limit = self.watchdog_s if patience_s is None else patience_s
        deadline = time.monotonic() + limit
        self.awaited = task  # set before re-checking real_done: the worker notifies for this task
        try:
            while not _ran(task):  # set by the worker thread
                run_here = self.run_waiting
                if run_here is None:
                    self.wake.set()  # nothing runs work on this thread: the worker does
                elif run_here():
                    continue  # it ran something here: look again
                self.lock.wait(AWAIT_POLL_S)
                if time.monotonic() > deadline:
                    if patience_s is not None:
                        return False
                    raise DeviceHang(f"task {task.task_id} on stream {task.sqe.stream_id} never finished")
        finally:
            self.awaited = None
        return True


def _ran(task: Task) -> bool:
    """Whether the worker has run task (read anew each time: another thread sets it)."""
    return task.real_done
