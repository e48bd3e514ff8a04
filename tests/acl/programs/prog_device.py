"""Conformance: init/finalize, devices, contexts, device info, timeouts, last-error calls."""

from __future__ import annotations

import threading

from _check import done, expect, ok, value

import acl

ACL_SUCCESS = 0
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207005
ACL_HOST = 1
ACL_HBM_MEM = 1


def before_init() -> None:
    expect(acl.rt.set_device(0), ACL_ERROR_UNINITIALIZE, "set_device before init")
    expect(acl.rt.malloc(64, 0)[1], ACL_ERROR_UNINITIALIZE, "malloc before init")
    expect(acl.finalize(), ACL_ERROR_UNINITIALIZE, "finalize before init")
    expect(acl.rt.get_device_count(), (2, ACL_SUCCESS), "get_device_count needs no init")
    expect(acl.rt.get_run_mode(), (ACL_HOST, ACL_SUCCESS), "get_run_mode")
    expect(acl.get_soc_name(), None, "get_soc_name before init")
    major, minor, patch, ret = acl.get_version()
    ok(ret, "get_version")
    expect(major >= 1 and minor >= 0 and patch >= 0, True, "version numbers")
    expect(acl.rt.get_version(), acl.get_version(), "rt.get_version alias")


def init_finalize(tmp: str) -> None:
    expect(acl.init(f"{tmp}/missing.json"), ACL_ERROR_INVALID_FILE, "init with a missing config")
    with open(f"{tmp}/bad.json", "w") as handle:
        handle.write("{not json")
    expect(acl.init(f"{tmp}/bad.json"), ACL_ERROR_PARSE_FILE, "init with a bad config")
    with open(f"{tmp}/acl.json", "w") as handle:
        handle.write('{"dump": {"dump_path": "/tmp"}}')
    ok(acl.init(f"{tmp}/acl.json"), "init with a config")
    expect(acl.init(), ACL_ERROR_REPEAT_INITIALIZE, "repeat init")
    ok(acl.finalize(), "finalize")
    expect(acl.finalize(), ACL_ERROR_REPEAT_FINALIZE, "repeat finalize")
    ok(acl.init(), "init again after finalize")
    expect(acl.get_soc_name(), "Ascend910B1", "get_soc_name")
    expect(acl.rt.get_soc_name(), "Ascend910B1", "rt.get_soc_name alias")


def devices() -> None:
    expect(acl.rt.get_device(), (0, ACL_ERROR_RT_CONTEXT_NULL), "get_device with no device set")
    expect(acl.rt.synchronize_device(), ACL_ERROR_RT_CONTEXT_NULL, "synchronize_device with no device")
    expect(acl.rt.synchronize_device_with_timeout(5), ACL_ERROR_RT_CONTEXT_NULL, "with timeout, no device")
    expect(acl.rt.get_mem_info(ACL_HBM_MEM), (0, 0, ACL_ERROR_RT_CONTEXT_NULL), "get_mem_info with no device")
    expect(acl.rt.set_device(2), ACL_ERROR_RT_INVALID_DEVICEID, "set_device out of range")
    expect(acl.rt.set_device(-1), ACL_ERROR_RT_INVALID_DEVICEID, "set_device negative")
    ok(acl.rt.set_device(1), "set_device 1")
    expect(value(acl.rt.get_device(), "get_device"), 1, "current device 1")
    ok(acl.rt.set_device(0), "set_device 0")
    expect(value(acl.rt.get_device(), "get_device"), 0, "current device 0")
    ok(acl.rt.synchronize_device(), "synchronize_device")
    ok(acl.rt.synchronize_device_with_timeout(100), "synchronize_device_with_timeout")
    ok(acl.rt.synchronize_device_with_timeout(-1), "synchronize_device_with_timeout forever")
    expect(acl.rt.synchronize_device_with_timeout(-5), ACL_ERROR_RT_PARAM_INVALID, "bad timeout")
    expect(value(acl.rt.device_can_access_peer(0, 1), "can_access_peer"), 1, "0 -> 1")
    expect(value(acl.rt.device_can_access_peer(0, 0), "can_access_peer self"), 0, "0 -> 0")
    expect(acl.rt.device_can_access_peer(0, 9)[1], ACL_ERROR_RT_INVALID_DEVICEID, "peer out of range")
    expect(acl.rt.reset_device(7), ACL_ERROR_RT_INVALID_DEVICEID, "reset_device out of range")
    expect(acl.rt.reset_device_force(-1), ACL_ERROR_RT_INVALID_DEVICEID, "reset_device_force out of range")
    ok(acl.rt.reset_device_force(1), "reset_device_force 1")


def device_info() -> None:
    attrs = {1: 6, 101: 24, 102: 24, 201: 48, 204: 192 * 1024, 301: 64 << 30, 302: 192 << 20}
    for attr, want in attrs.items():
        expect(value(acl.rt.get_device_info(0, attr), f"get_device_info {attr}"), want, f"attribute {attr}")
    expect(acl.rt.get_device_info(0, 999), (0, ACL_ERROR_RT_PARAM_INVALID), "unknown attribute")
    expect(acl.rt.get_device_info(5, 101), (0, ACL_ERROR_RT_INVALID_DEVICEID), "unknown device")


def contexts() -> None:
    default_ctx = value(acl.rt.get_context(), "get_context")
    expect(acl.rt.destroy_context(default_ctx), ACL_ERROR_RT_PARAM_INVALID, "destroy the default context")
    ctx = value(acl.rt.create_context(0), "create_context")
    expect(value(acl.rt.get_context(), "get_context"), ctx, "created context is current")
    stream = value(acl.rt.create_stream(), "stream in the new context")
    ok(acl.rt.set_context(default_ctx), "set_context back")
    expect(value(acl.rt.get_context(), "get_context"), default_ctx, "default context current")
    ok(acl.rt.destroy_context(ctx), "destroy_context")
    expect(acl.rt.destroy_context(ctx), ACL_ERROR_RT_INVALID_HANDLE, "destroy twice")
    expect(acl.rt.set_context(ctx), ACL_ERROR_RT_INVALID_HANDLE, "set a destroyed context")
    expect(acl.rt.synchronize_stream(stream), ACL_ERROR_RT_INVALID_HANDLE, "stream of a destroyed context")
    expect(acl.rt.set_context(0), ACL_ERROR_RT_PARAM_INVALID, "set_context null")
    expect(acl.rt.create_context(3), (0, ACL_ERROR_RT_INVALID_DEVICEID), "create_context bad device")
    seen: list[object] = []

    def worker(args: list[int]) -> None:
        seen.append(acl.rt.get_context())  # a new thread has no context ...
        seen.append(acl.rt.set_context(args[0]))  # ... until it sets one
        seen.append(acl.rt.get_device())

    thread = threading.Thread(target=worker, args=([default_ctx],))
    thread.start()
    thread.join()
    expect(seen, [(0, ACL_ERROR_RT_CONTEXT_NULL), 0, (0, 0)], "contexts are per thread")


def timeouts_and_errors() -> None:
    ok(acl.rt.set_op_wait_timeout(10), "set_op_wait_timeout")
    ok(acl.rt.set_op_execute_timeout(20), "set_op_execute_timeout")
    expect(acl.rt.set_op_wait_timeout(-1), ACL_ERROR_RT_PARAM_INVALID, "negative wait timeout")
    expect(acl.rt.set_op_execute_timeout(-1), ACL_ERROR_RT_PARAM_INVALID, "negative execute timeout")
    acl.rt.get_last_error(0)
    expect(acl.rt.peek_at_last_error(0), ACL_SUCCESS, "no error yet")
    expect(acl.rt.set_device(9), ACL_ERROR_RT_INVALID_DEVICEID, "a failing call")
    expect("set_device" in acl.get_recent_err_msg(), True, "recent error message names the call")
    expect(acl.get_recent_err_msg(), "", "message is cleared once read")
    expect(acl.rt.peek_at_last_error(0), ACL_ERROR_RT_INVALID_DEVICEID, "peek keeps the error")
    expect(acl.rt.peek_at_last_error(0), ACL_ERROR_RT_INVALID_DEVICEID, "peek again")
    expect(acl.rt.get_last_error(0), ACL_ERROR_RT_INVALID_DEVICEID, "get returns it")
    expect(acl.rt.get_last_error(0), ACL_SUCCESS, "get cleared it")
    expect(acl.rt.get_last_error(1), ACL_ERROR_RT_PARAM_INVALID, "only the thread level exists")
    expect(acl.rt.peek_at_last_error(2), ACL_ERROR_RT_PARAM_INVALID, "peek: only the thread level exists")


def context_limit() -> None:
    """Contexts until the device has no address space left (207005), then release them."""
    made: list[int] = []
    while True:
        ctx, ret = acl.rt.create_context(0)
        if ret:
            expect((ctx, ret), (0, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL), "context limit")
            break
        made.append(ctx)
        expect(len(made) < 5000, True, "a context limit exists")
    for ctx in made:
        ok(acl.rt.destroy_context(ctx), "destroy_context")


def main() -> None:
    import tempfile

    before_init()
    with tempfile.TemporaryDirectory() as tmp:
        init_finalize(tmp)
    devices()
    device_info()
    contexts()
    timeouts_and_errors()
    context_limit()
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("device")


if __name__ == "__main__":
    main()
