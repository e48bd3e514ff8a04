"""Host callbacks: launch_callback + subscribe_report / process_report, and launch_host_func.

The device reports a callback task; the report goes to the host thread subscribed to the
stream, which runs fn(args) inside process_report and then tells the device it is done. A
blocking callback holds later tasks of its stream until then. A device reset while a callback
runs only drops the report of it (each device's reports carry its epoch): the thread running it
lives on and serves later callbacks.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cannrt.errors import CannError, ErrorCode

if TYPE_CHECKING:
    from cannrt.runtime.core import Runtime
    from cannrt.runtime.stream import Stream

HOST_FUNC_THREAD = -1  # pseudo thread id of the runtime's own host-function worker


@dataclass
class _Callback:
    fn: Callable[[Any], object]
    args: Any
    thread_id: int


@dataclass
class _Report:
    device_id: int
    token: int
    callback: _Callback
    epoch: int  # of the device when reported: a reset since makes the token meaningless


class CallbackHub:
    """Routes callback reports from devices to subscribed host threads."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._lock = threading.Lock()
        self._subscriptions: dict[Stream, int] = {}  # stream -> thread id
        self._queues: dict[int, queue.Queue[_Report]] = {}
        self._pending: dict[tuple[int, int], _Callback] = {}  # (device, callback id) -> callback
        self._ids = itertools.count(1)
        self._epochs: dict[int, int] = {}  # device -> resets so far
        self._host_worker: threading.Thread | None = None
        self.errors: list[BaseException] = []  # exceptions raised inside callback functions

    # -- subscription ------------------------------------------------------------------------
    def subscribe(self, thread_id: int, stream: Stream) -> None:
        """Bind a stream's callbacks to a thread (aclrtSubscribeReport)."""
        with self._lock:
            if stream in self._subscriptions:
                raise CannError(ErrorCode.RT_STREAM_SUBSCRIBE, f"stream {stream.stream_id} is already subscribed")
            self._subscriptions[stream] = thread_id
            self._queues.setdefault(thread_id, queue.Queue())

    def unsubscribe(self, thread_id: int, stream: Stream) -> None:
        """Unbind (aclrtUnSubscribeReport)."""
        with self._lock:
            if self._subscriptions.get(stream) != thread_id:
                raise CannError(
                    ErrorCode.RT_STREAM_NO_CB_REG, f"stream {stream.stream_id} is not subscribed to thread {thread_id}"
                )
            del self._subscriptions[stream]

    def forget_stream(self, stream: Stream) -> None:
        """A destroyed stream loses its subscription."""
        with self._lock:
            self._subscriptions.pop(stream, None)

    def device_reset(self, device_id: int) -> None:
        """The device is going away: its pending callbacks are dropped and reports of callbacks
        running now are not handed back to it."""
        with self._lock:
            self._epochs[device_id] = self._epochs.get(device_id, 0) + 1
            for key in [key for key in self._pending if key[0] == device_id]:
                del self._pending[key]

    # -- launching ---------------------------------------------------------------------------
    def launch(self, stream: Stream, fn: Callable[[Any], object], args: Any, block: bool) -> None:
        """Queue a callback task (aclrtLaunchCallback); the stream must be subscribed."""
        _check_callable(fn)
        with self._lock:
            thread_id = self._subscriptions.get(stream)
        if thread_id is None:
            raise CannError(ErrorCode.RT_STREAM_NO_CB_REG, f"stream {stream.stream_id} has no subscribed report thread")
        self._launch(stream, _Callback(fn, args, thread_id), block)

    def launch_host_func(self, stream: Stream, fn: Callable[[Any], object], args: Any) -> None:
        """Queue a host function run by the runtime's own worker (aclrtLaunchHostFunc); blocking."""
        _check_callable(fn)
        self._ensure_host_worker()
        self._launch(stream, _Callback(fn, args, HOST_FUNC_THREAD), True)

    def _launch(self, stream: Stream, callback: _Callback, block: bool) -> None:
        callback_id = next(self._ids) & 0xFFFFFFFF
        with self._lock:
            self._pending[(stream.device_id, callback_id)] = callback
            self._queues.setdefault(callback.thread_id, queue.Queue())
        stream.submit_callback(callback_id, block)

    def sink(self, device_id: int, sq_id: int, stream_id: int, task_id: int, callback_id: int, token: int) -> None:
        """Called on the device worker when a callback task is reached (the report)."""
        with self._lock:
            callback = self._pending.pop((device_id, callback_id), None)
            target = self._queues.get(callback.thread_id) if callback else None
            epoch = self._epochs.get(device_id, 0)
        if callback is None or target is None:
            self.runtime.driver.callback_done(device_id, token)
            return
        target.put(_Report(device_id, token, callback, epoch))

    # -- processing --------------------------------------------------------------------------
    def process(self, timeout_ms: int) -> None:
        """Run one reported callback on the calling thread (aclrtProcessReport)."""
        thread_id = threading.get_ident()
        with self._lock:
            subscribed = thread_id in self._subscriptions.values()
            inbox = self._queues.get(thread_id)
        if not subscribed or inbox is None:
            raise CannError(ErrorCode.RT_THREAD_SUBSCRIBE, f"thread {thread_id} is subscribed to no stream")
        wait_s = None if timeout_ms < 0 else timeout_ms / 1000.0
        try:
            report = inbox.get(timeout=wait_s)
        except queue.Empty:
            raise CannError(ErrorCode.WAIT_CALLBACK_TIMEOUT, f"no callback report within {timeout_ms} ms") from None
        self._run(report)

    def _run(self, report: _Report) -> None:
        try:
            report.callback.fn(report.callback.args)
        except BaseException as exc:  # a failing callback must not wedge its stream
            self.errors.append(exc)
        finally:
            self._done(report)

    def _done(self, report: _Report) -> None:
        """Tell the device the callback ran, unless it was reset since (then nobody waits)."""
        with self._lock:  # a reset cannot slip between the check and the call
            if self._epochs.get(report.device_id, 0) != report.epoch:
                return
            try:
                self.runtime.driver.callback_done(report.device_id, report.token)
            except CannError as exc:  # the device closed without a reset (runtime shutting down)
                self.errors.append(exc)

    def _ensure_host_worker(self) -> None:
        with self._lock:
            if self._host_worker is not None:
                return
            inbox = self._queues.setdefault(HOST_FUNC_THREAD, queue.Queue())
            self._host_worker = threading.Thread(
                target=self._host_loop, args=(inbox,), name="cannrt-hostfunc", daemon=True
            )
            self._host_worker.start()

    def _host_loop(self, inbox: queue.Queue[_Report]) -> None:
        while True:
            report = inbox.get()
            try:
                self._run(report)
            except BaseException as exc:  # the thread serves every later host function too
                self.errors.append(exc)


def _check_callable(fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"a callback is a callable, not {type(fn).__name__}")
