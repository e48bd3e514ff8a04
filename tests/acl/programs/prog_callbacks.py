"""Conformance: report threads (acl.util.start_thread), subscribe_report, launch_callback (blocking
and not), process_report, unsubscribe_report, stop_thread, launch_host_func."""

from __future__ import annotations

import threading
import time

from _check import done, expect, ok, value

import acl

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011
ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012
ACL_ERROR_RT_STREAM_NO_CB_REG = 107015
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_CALLBACK_NO_BLOCK, ACL_CALLBACK_BLOCK = 0, 1

running = [True]
thread_results: list[int] = []


def report_loop(args: list[object]) -> None:
    """The report thread: set the context, then loop on process_report."""
    context, timeout = args
    thread_results.append(acl.rt.set_context(context))
    while running[0]:
        ret = acl.rt.process_report(timeout)
        if ret not in (0, ACL_ERROR_WAIT_CALLBACK_TIMEOUT):
            thread_results.append(ret)


def callbacks(context: int) -> None:
    stream = value(acl.rt.create_stream(), "create_stream")
    other = value(acl.rt.create_stream(), "create_stream")
    tid, ret = acl.util.start_thread(report_loop, [context, 20])
    ok(ret, "start_thread")
    expect(
        acl.rt.launch_callback(print, None, ACL_CALLBACK_BLOCK, stream),
        ACL_ERROR_RT_STREAM_NO_CB_REG,
        "launch on an unsubscribed stream",
    )
    ok(acl.rt.subscribe_report(tid, stream), "subscribe_report")
    ok(acl.rt.subscribe_report(tid, other), "one thread serves many streams")
    expect(acl.rt.subscribe_report(tid, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE, "subscribe twice")
    seen: list[tuple[str, int]] = []
    for index in range(3):
        ok(acl.rt.launch_callback(lambda n: seen.append(("block", n)), index, ACL_CALLBACK_BLOCK, stream), "block")
    ok(acl.rt.launch_callback(lambda n: seen.append(("free", n)), 9, ACL_CALLBACK_NO_BLOCK, other), "no block")
    ok(acl.rt.synchronize_stream(stream), "sync after blocking callbacks")
    expect(seen[:3] == [("block", 0), ("block", 1), ("block", 2)] or ("free", 9) in seen, True, "in order")
    ok(acl.rt.synchronize_stream(other), "sync other")
    deadline = time.monotonic() + 5
    while ("free", 9) not in seen and time.monotonic() < deadline:
        time.sleep(0.005)
    expect(sorted(seen), [("block", 0), ("block", 1), ("block", 2), ("free", 9)], "every callback ran")
    expect(acl.rt.launch_callback(print, None, 7, stream), ACL_ERROR_RT_PARAM_INVALID, "unknown block type")
    running[0] = False
    ok(acl.util.stop_thread(tid), "stop_thread")
    expect(acl.util.stop_thread(tid), ACL_ERROR_INVALID_PARAM, "stop_thread twice")
    expect(thread_results, [0], "the report thread saw only successes and timeouts")
    ok(acl.rt.unsubscribe_report(tid, stream), "unsubscribe_report")
    ok(acl.rt.unsubscribe_report(tid, other), "unsubscribe other")
    expect(acl.rt.unsubscribe_report(tid, stream), ACL_ERROR_RT_STREAM_NO_CB_REG, "unsubscribe twice")
    for s in (stream, other):
        ok(acl.rt.destroy_stream(s), "destroy_stream")


def process_report_errors() -> None:
    expect(acl.rt.process_report(10), ACL_ERROR_RT_THREAD_SUBSCRIBE, "no stream subscribed to this thread")
    expect(acl.rt.process_report(0), ACL_ERROR_RT_PARAM_INVALID, "timeout 0")
    expect(acl.rt.process_report(-2), ACL_ERROR_RT_PARAM_INVALID, "timeout below -1")
    stream = value(acl.rt.create_stream(), "create_stream")
    ok(acl.rt.subscribe_report(threading.get_ident(), stream), "subscribe this thread")
    expect(acl.rt.process_report(5), ACL_ERROR_WAIT_CALLBACK_TIMEOUT, "nothing to process")
    got: list[int] = []
    ok(acl.rt.launch_callback(got.append, 5, ACL_CALLBACK_NO_BLOCK, stream), "launch")
    ok(acl.rt.process_report(2000), "process it here")
    expect(got, [5], "ran on this thread")
    ok(acl.rt.unsubscribe_report(threading.get_ident(), stream), "unsubscribe")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")


def host_funcs() -> None:
    stream = value(acl.rt.create_stream(), "create_stream")
    order: list[str] = []
    ok(acl.rt.launch_host_func(stream, order.append, "first"), "launch_host_func")
    ok(acl.rt.launch_host_func(stream, order.append, "second"), "launch_host_func")
    ok(acl.rt.synchronize_stream(stream), "sync")
    expect(order, ["first", "second"], "host functions in stream order")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    expect(acl.rt.launch_host_func(stream, print, None), ACL_ERROR_RT_INVALID_HANDLE, "host func on destroyed")
    expect(acl.rt.subscribe_report(1, stream), ACL_ERROR_RT_INVALID_HANDLE, "subscribe a destroyed stream")
    expect(acl.rt.launch_callback(print, None, 1, stream), ACL_ERROR_RT_INVALID_HANDLE, "callback on destroyed")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    context = value(acl.rt.get_context(), "get_context")
    callbacks(context)
    process_report_errors()
    host_funcs()
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("callbacks")


if __name__ == "__main__":
    main()
