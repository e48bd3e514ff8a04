"""Host callbacks (aclrtLaunchCallback, aclrtSubscribeReport, aclrtProcessReport, aclrtLaunchHostFunc).

A report thread (usually from acl.util.start_thread) loops on process_report(timeout); the
streams subscribed to it deliver their callbacks there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._state import INT32_MAX, api, as_callable, as_handle, as_int, fail, runtime, stream_of
from cannrt.errors import CannError, ErrorCode

SUBSCRIBE_POLL_S = 0.002  # how often an unsubscribed report thread looks for its subscription


@api()
def launch_callback(fn: Callable[[Any], Any], args: Any, block_type: int, stream: int) -> None:
    """Queue fn(args) on stream, run by its subscribed report thread (aclrtLaunchCallback).

    ACL_CALLBACK_BLOCK holds later tasks of the stream until fn returns; NO_BLOCK does not.
    """
    function, block = as_callable("fn", fn), as_int("block_type", block_type)
    if block not in (c.ACL_CALLBACK_NO_BLOCK, c.ACL_CALLBACK_BLOCK):
        raise fail(ErrorCode.RT_PARAM_INVALID, f"block_type must be ACL_CALLBACK_NO_BLOCK or _BLOCK, got {block}")
    target = stream_of(as_handle("stream", stream), submit=True)
    runtime().callbacks.launch(target, function, args, block == c.ACL_CALLBACK_BLOCK)


@api()
def launch_host_func(stream: int, fn: Callable[[Any], Any], args: Any) -> None:
    """Queue fn(args) on stream, run by the runtime's own thread; later tasks wait (aclrtLaunchHostFunc)."""
    function = as_callable("fn", fn)
    target = stream_of(as_handle("stream", stream), submit=True)
    runtime().callbacks.launch_host_func(target, function, args)


@api()
def subscribe_report(thread_id: int, stream: int) -> None:
    """Bind the stream's callbacks to a thread; one thread per stream (aclrtSubscribeReport)."""
    tid = as_int("thread_id", thread_id)
    runtime().callbacks.subscribe(tid, stream_of(as_handle("stream", stream)))


@api()
def unsubscribe_report(thread_id: int, stream: int) -> None:
    """Unbind a stream from its report thread (aclrtUnSubscribeReport)."""
    tid = as_int("thread_id", thread_id)
    runtime().callbacks.unsubscribe(tid, stream_of(as_handle("stream", stream)))


@api()
def process_report(timeout: int) -> None:
    """Run one reported callback on this thread, waiting up to timeout ms (-1: forever) (aclrtProcessReport).

    ACL_ERROR_WAIT_CALLBACK_TIMEOUT when none arrives in time; ACL_ERROR_RT_THREAD_SUBSCRIBE when
    no stream got subscribed to the calling thread within the timeout (at once for -1).
    """
    limit = as_int("timeout", timeout)
    if limit == 0 or not -1 <= limit <= INT32_MAX:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"timeout must be -1 (forever) or 1..{INT32_MAX} ms, got {limit}")
    hub = runtime().callbacks
    if limit == -1:
        hub.process(-1)
        return
    deadline = time.monotonic() + limit / 1000
    while True:  # a report loop may start before its thread is subscribed: wait for that within the timeout
        try:
            hub.process(max(1, round((deadline - time.monotonic()) * 1000)))
            return
        except CannError as exc:
            if exc.code != ErrorCode.RT_THREAD_SUBSCRIBE or time.monotonic() >= deadline:
                raise
        time.sleep(SUBSCRIBE_POLL_S)
