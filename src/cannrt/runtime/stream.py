"""Streams: in-order task queues, each backed by one SQ (models aclrtCreateStream and friends)."""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.abi import (
    CALLBACK_SQE,
    EVENT_SQE,
    SDMA_SQE,
    WR_CQE,
    SqeType,
)
from cannrt.driver.hal import Resource
from cannrt.errors import CannError, CannTimeout, ErrorCode
from cannrt.runtime.launch import Launcher
from cannrt.runtime.submit_lock import SubmitLock
from cannrt.runtime.tracing import api_call

if TYPE_CHECKING:
    from cannrt.runtime.context import Context

PRIORITY_HIGHEST = 0
PRIORITY_LOWEST = 7
STREAM_FLAGS = 0x1 | 0x2  # ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC


MAX_POLL_DOUBLINGS = 32
MAX_TIMEOUT_MS = (1 << 31) - 1  # AscendCL timeouts are int32 ms: the modelled clock keeps its range
HELD_PRUNE = 64  # held host objects before the stream looks which of their tasks completed


def timeout_ns(timeout_ms: object) -> int | None:
    """A host wait's timeout in ns; None (wait forever) for None, a negative value or infinity.
    TypeError unless a real number; CannError 107000 for NaN or more than MAX_TIMEOUT_MS."""
    if timeout_ms is None:
        return None
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, numbers.Real):
        raise TypeError(f"a timeout is a number of milliseconds, not {type(timeout_ms).__name__}")
    ms = float(timeout_ms)
    if math.isnan(ms) or MAX_TIMEOUT_MS < ms < math.inf:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"timeout {timeout_ms} ms: at most {MAX_TIMEOUT_MS} ms, or < 0")
    return None if ms < 0 or ms == math.inf else int(ms * 1_000_000)


def poll_cost(call_ns: int, streak: int) -> int:
    """Modelled host time of a query after `streak` not-ready answers in a row: it doubles, so a
    polling loop reaches any modelled completion in O(log) iterations, deterministically."""
    return call_ns << min(streak, MAX_POLL_DOUBLINGS)


class Stream:
    """An in-order queue of device tasks; tasks of different streams may run concurrently."""

    def __init__(self, context: Context, priority: int = 0, flags: int = 0, *, is_default: bool = False) -> None:
        self.context = context
        self.priority = min(max(priority, PRIORITY_HIGHEST), PRIORITY_LOWEST)  # out of range clamps
        self.flags = flags
        self.is_default = is_default
        self.device_id = context.device_id
        runtime = context.runtime
        self._driver = runtime.driver
        self._runtime = runtime
        self._clock = runtime.clock
        self._costs = runtime.settings.host_costs
        self.stream_id = self._driver.resource_alloc(self.device_id, Resource.STREAM)
        try:
            self.sq_id = self._driver.sq_alloc(
                self.device_id, self.stream_id, context.asid, self.priority, context.cq_id
            )
        except CannError:
            self._driver.resource_free(self.device_id, Resource.STREAM, self.stream_id)
            raise
        self.depth: int = runtime.settings.chip.sq_depth
        self._ring = self._driver.sq_map(self.device_id, self.sq_id)
        self._send = self._ring.send
        self._submit_lock = SubmitLock()  # one producer at a time: task ids, argument slots, ring
        self.launcher = Launcher(self, self._ring, self._clock, self._costs.launch_ns, self._submit_lock)
        self.destroyed = False
        self.stop_on_error = False
        self.error_code = 0  # first device error seen on this stream and not yet reported
        self.creator_thread = threading.get_ident()
        self._poll_streak = 0  # consecutive not-ready queries
        # host memory that queued tasks read or write: (position of the last such task, owner)
        self._held: list[tuple[int, object]] = []

    @property
    def tail(self) -> int:
        """Tasks submitted (monotonic): the position of the next one (the ring's write position)."""
        return self._ring.tail

    def __repr__(self) -> str:
        kind = "default " if self.is_default else ""
        return f"<{kind}Stream {self.stream_id} on device {self.device_id}, {self.tail} tasks>"

    # -- submission --------------------------------------------------------------------------
    def check_usable(self) -> None:
        """Raise if the stream was destroyed or its context carries a sticky error."""
        if self.destroyed:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"stream {self.stream_id} was destroyed")
        self.context.check_sticky()

    def _submit(self, pack: Callable[[int], bytes], host_ns: int) -> int:
        """Send one non-kernel SQE built by pack(position)."""
        self.check_usable()
        with self._submit_lock:
            position = self.tail
            sqe = pack(position)
            now = self._clock.now_ns = self._clock.now_ns + host_ns
            self._send(sqe, now)
        return position

    def submit_event(self, sqe_type: int, event_id: int, mode: int, value: int) -> int:
        """Send an event record / wait / write-value SQE."""
        stream_id = self.stream_id
        return self._submit(
            lambda pos: EVENT_SQE.pack(sqe_type, 0, 0, stream_id, pos & 0xFFFF, event_id, mode, value),
            self._costs.event_ns,
        )

    def submit_sdma(self, op: int, kind: int, src: int, dst: int, length: int, value: int = 0) -> int:
        """Send a copy or memset SQE."""
        stream_id = self.stream_id
        return self._submit(
            lambda pos: SDMA_SQE.pack(SqeType.SDMA, 0, 0, stream_id, pos & 0xFFFF, op, kind, value, src, dst, length),
            self._costs.memcpy_async_ns,
        )

    def submit_callback(self, callback_id: int, block: bool) -> int:
        """Send a host-callback placeholder SQE."""
        stream_id = self.stream_id
        return self._submit(
            lambda pos: CALLBACK_SQE.pack(
                SqeType.PLACE_HOLDER, WR_CQE, 0, stream_id, pos & 0xFFFF, callback_id, int(block)
            ),
            self._costs.call_ns,
        )

    def hold(self, owner: object) -> None:
        """Keep owner (the host memory of the task just queued) alive until that task completed,
        whatever the caller does meanwhile: a failed wait must not free what a queued copy uses."""
        with self._submit_lock:  # threads sharing the stream: no entry lost to a prune
            self._held.append((self.tail, owner))
            crowded = len(self._held) > HELD_PRUNE
        if crowded:
            self._release_held(self.head())

    def _release_held(self, head: int) -> None:
        """Drop what tasks before position head held (they completed)."""
        with self._submit_lock:
            self._held = [(end, owner) for end, owner in self._held if end > head]

    # -- observation -------------------------------------------------------------------------
    def head(self) -> int:
        """Tasks of this stream completed by now on the modelled timeline."""
        return self._driver.sq_head(self.device_id, self.sq_id, self._clock.now_ns)

    @api_call("aclrtStreamQuery")
    def query(self) -> bool:
        """True if every task submitted so far has completed (models aclrtStreamQuery)."""
        self.check_usable()
        self._clock.now_ns += poll_cost(self._costs.call_ns, self._poll_streak)
        done = self.head() >= self.tail
        self._poll_streak = 0 if done else self._poll_streak + 1
        self.context.drain_reports()
        return done

    @api_call("aclrtSynchronizeStream")
    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Block until every submitted task completed; CannTimeout(507046) after timeout_ms of
        modelled time; a device error on this stream raises its code (aclrtSynchronizeStream)."""
        if self.destroyed:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"stream {self.stream_id} was destroyed")
        wait_ns = timeout_ns(timeout_ms)
        self._clock.now_ns += self._costs.sync_ns
        tail = self.tail
        finished = self._runtime.waited(
            self._driver.sq_wait(self.device_id, self.sq_id, tail, self._clock.now_ns, wait_ns)
        )
        self.context.drain_reports()
        if finished and self._held:
            self._release_held(tail)
        if not finished:
            head = self.head()
            raise CannTimeout(
                ErrorCode.RT_STREAM_SYNC_TIMEOUT,
                f"stream {self.stream_id}: {self.tail - head} of {self.tail} tasks not complete after {timeout_ms} ms",
                pending=self.tail - head,
                timeout_ms=timeout_ms,
            )
        self.raise_pending_error()

    def raise_pending_error(self) -> None:
        """Raise the device error this stream saw (once), then any sticky context error."""
        code, self.error_code = self.error_code, 0
        if code:
            raise CannError(code, self.context.error_report(self) or f"task failed on stream {self.stream_id}")
        self.context.check_sticky()

    def set_failure_mode(self, stop_on_error: bool) -> None:
        """Continue-on-error (default) or stop-on-error (models aclrtSetStreamFailureMode)."""
        self.check_usable()
        self.stop_on_error = stop_on_error
        self._driver.sq_set_stop_on_error(self.device_id, self.sq_id, stop_on_error)

    @api_call("aclrtDestroyStream")
    def destroy(self, force: bool = False) -> None:
        """Destroy: wait for pending tasks first, or discard them with force (destroy_stream_force)."""
        if self.destroyed:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"stream {self.stream_id} was already destroyed")
        if self.is_default:
            raise CannError(ErrorCode.RT_PARAM_INVALID, "the default stream cannot be destroyed")
        if not force:
            with contextlib.suppress(CannError):
                self._runtime.waited(
                    self._driver.sq_wait(self.device_id, self.sq_id, self.tail, self._clock.now_ns, None)
                )
        self.release(discard=force)

    def release(self, discard: bool) -> None:
        """Give the SQ, stream id and argument area back (no waiting)."""
        self.destroyed = True
        self._driver.sq_free(self.device_id, self.sq_id, discard)  # fetches what is queued first
        self.launcher.release()  # then its parameter blocks may go
        self._driver.resource_free(self.device_id, Resource.STREAM, self.stream_id)
        self.context.forget_stream(self)
