"""Fault detection through the pyACL facade: aclrtSetOpExecuteTimeOut judged on the modelled
clock, the overflow status and saturation mode calls, and acl.json's overflow switch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

import numpy as np

import cannrt
from cannrt.acl._state import STATE, stream_of
from cannrt.tools.dump import load_dump_dir

MINUTE_NS = 60_000_000_000


def _launch(stream: int, kernel: str, *args: object, block_dim: int = 1) -> None:
    """A kernel launch on a pyACL stream, through the runtime beneath the facade."""
    assert STATE.runtime is not None
    STATE.runtime.launch(stream_of(stream, submit=True), kernel, block_dim, list(args))


def test_a_hung_kernel_fails_at_the_execute_timeout_in_modelled_time(acl: ModuleType) -> None:
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.set_op_execute_timeout(1) == 0
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    acl.rt.record_event(start, stream)
    _launch(stream, "spin", MINUTE_NS, block_dim=4)  # a kernel that would run for 60 s
    acl.rt.record_event(end, stream)
    assert acl.rt.synchronize_stream(stream) == 507014  # ACL_ERROR_RT_AICORE_TIMEOUT
    runtime = STATE.runtime
    assert runtime is not None and runtime.host_time_ns < 2_000_000_000  # killed after 1 s modelled, not 60
    context = stream_of(stream).context
    (record,) = context.exception_records
    assert record.error_code == 507014 and record.error_bits == ("AIC_TASK_TIMEOUT",)
    assert record.block_dim == 4
    text = context.error_report(None)
    assert "kernel execute timeout: still running 1 s after it started (aclrtSetOpExecuteTimeOut)" in text
    dumps = Path(os.environ["ASCEND_WORK_PATH"]) / "extra-info" / "data-dump"
    (dumped,) = load_dump_dir(dumps)  # a timeout leaves an exception dump, as CANN's
    assert dumped.exception and dumped.status == 507014 and dumped.op_type == "Spin"
    assert acl.rt.create_stream()[1] == 507014  # sticky
    context, ret = acl.rt.create_context(0)  # another context on the same device is unaffected
    assert ret == 0
    mine, _ = acl.rt.create_stream()
    _launch(mine, "spin", 1000)
    assert acl.rt.synchronize_stream(mine) == 0
    assert acl.rt.set_device(1) == 0
    other, _ = acl.rt.create_stream()
    _launch(other, "spin", 1000)  # another device: short kernels run, the limit applies there too
    assert acl.rt.synchronize_stream(other) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.set_device(0) == 0
    fresh, _ = acl.rt.create_stream()
    _launch(fresh, "spin", 500_000_000)  # half a second: within the limit
    assert acl.rt.synchronize_stream(fresh) == 0


def test_the_execute_timeout_is_range_checked(acl: ModuleType) -> None:
    assert acl.rt.set_op_execute_timeout(-1) == 107000
    assert acl.rt.set_op_execute_timeout(1092) == 107000
    assert acl.rt.set_op_execute_timeout(0) == 0


def test_overflow_status_is_copied_to_device_memory_and_reset(acl: ModuleType) -> None:
    stream, _ = acl.rt.create_stream()
    values = np.full(16, 300.0, np.float16)
    x, _ = acl.rt.malloc(values.nbytes, 0)
    y, _ = acl.rt.malloc(values.nbytes, 0)
    status, _ = acl.rt.malloc(64, 0)
    acl.rt.memcpy(x, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, 1)
    spec = cannrt.runtime.core.tensor_arg
    _launch(stream, "mul", spec(x, 1, (16,)), spec(x, 1, (16,)), spec(y, 1, (16,)))
    assert acl.rt.get_overflow_status(status, 64, stream) == 0
    host = np.zeros(8, np.uint64)
    acl.rt.memcpy(acl.util.numpy_to_ptr(host), 64, status, 64, 2)
    assert host[0] == 2 and not host[1:].any()  # the overflow flag
    assert acl.rt.reset_overflow_status(stream) == 0
    assert acl.rt.get_overflow_status(status, 64, stream) == 0
    acl.rt.memcpy(acl.util.numpy_to_ptr(host), 64, status, 64, 2)
    assert not host.any()
    assert acl.rt.get_overflow_status(status, 8, stream) == 107000  # needs 64 bytes


def test_saturation_mode_is_set_and_read_back(acl: ModuleType) -> None:
    assert acl.rt.get_device_sat_mode() == (1, 0)  # inf/nan by default
    assert acl.rt.set_device_sat_mode(0) == 0
    stream, _ = acl.rt.create_stream()
    values = np.full(4, 300.0, np.float16)
    x, _ = acl.rt.malloc(values.nbytes, 0)
    acl.rt.memcpy(x, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, 1)
    spec = cannrt.runtime.core.tensor_arg
    _launch(stream, "mul", spec(x, 1, (4,)), spec(x, 1, (4,)), spec(x, 1, (4,)))
    assert acl.rt.synchronize_stream(stream) == 0
    acl.rt.memcpy(acl.util.numpy_to_ptr(values), values.nbytes, x, values.nbytes, 2)
    assert values.tolist() == [65504.0] * 4
    assert acl.rt.get_device_sat_mode() == (0, 0)
    assert acl.rt.set_device_sat_mode(2) == 107000
    assert acl.rt.set_device_sat_mode(1) == 0


def test_acl_json_dump_debug_turns_overflow_detection_on(acl: ModuleType, tmp_path: Path) -> None:
    acl.finalize()
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"dump": {"dump_path": str(tmp_path / "dump"), "dump_debug": "on"}}))
    assert acl.init(str(config)) == 0
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    ones = np.ones(4, np.float32)
    x, _ = acl.rt.malloc(16, 0)
    zero, _ = acl.rt.malloc(16, 0)
    acl.rt.memcpy(x, 16, acl.util.numpy_to_ptr(ones), 16, 1)
    acl.rt.memset(zero, 16, 0, 16)
    spec = cannrt.runtime.core.tensor_arg
    _launch(stream, "div", spec(x, 0, (4,)), spec(zero, 0, (4,)), spec(x, 0, (4,)))
    assert acl.rt.synchronize_stream(stream) == 207016  # ACL_ERROR_RT_AIVEC_OVER_FLOW
    acl.rt.synchronize_device()
    (dumped,) = load_dump_dir(tmp_path / "dump")
    assert dumped.op_type == "RealDiv" and dumped.status == 207016


def test_an_event_wait_fails_at_the_op_wait_timeout_in_modelled_time(acl: ModuleType) -> None:
    assert acl.rt.set_op_wait_timeout(1) == 0
    stream, _ = acl.rt.create_stream()
    other, _ = acl.rt.create_stream()
    never, _ = acl.rt.create_event()  # never recorded: the wait blocks
    assert acl.rt.stream_wait_event(stream, never) == 0
    _launch(stream, "spin", 1000)  # after the failed wait the stream goes on (continue on error)
    assert acl.rt.synchronize_stream(stream) == 107020  # ACL_ERROR_RT_TASK_TIMEOUT
    runtime = STATE.runtime
    assert runtime is not None and 1_000_000_000 <= runtime.host_time_ns < 1_100_000_000
    (record,) = stream_of(stream).context.exception_records
    assert record.error_bits == ("EVENT_WAIT_TIMEOUT",)
    assert "not recorded 1 s after the wait began" in record.message
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    other, _ = acl.rt.create_stream()
    soon, _ = acl.rt.create_event()
    assert acl.rt.stream_wait_event(stream, soon) == 0
    _launch(other, "spin", 500_000_000)  # recorded after half a second: within the limit
    assert acl.rt.record_event(soon, other) == 0
    assert acl.rt.synchronize_stream(stream) == 0
