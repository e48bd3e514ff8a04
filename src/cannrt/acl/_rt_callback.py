"""Host callbacks (aclrtLaunchCallback, aclrtSubscribeReport, aclrtProcessReport, aclrtLaunchHostFunc).

A report thread (usually from acl.util.start_thread) loops on process_report(timeout); the
streams subscribed to it deliver their callbacks there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._state import api, as_callable, as_handle, as_int, fail, runtime, stream_of
from cannrt.errors import ErrorCode


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
    no stream is subscribed to the calling thread.
    """
    limit = as_int("timeout", timeout)
    if limit == 0 or limit < -1:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"timeout must be -1 (forever) or > 0 ms, got {limit}")
    runtime().callbacks.process(limit)
