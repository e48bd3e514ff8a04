"""Device errors: a kernel fault is reported with a precise CANN-style report, becomes sticky for
its context until reset_device, and stop-on-error streams discard what follows the failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from cannrt import CannError, ErrorCode
from cannrt.abi import CopyKind
from cannrt.runtime import memory_ops
from cannrt.runtime.core import ExceptionInfo

if TYPE_CHECKING:
    from cannrt.runtime.context import Context
    from cannrt.runtime.stream import Stream
    from conftest import Npu

FAULT = ErrorCode.RT_VECTOR_CORE_EXCEPTION  # relu runs on the vector cores


class Faulty:
    """A context with a small buffer and a relu launch that reads past its end."""

    def __init__(self, npu: Npu) -> None:
        self.npu = npu
        self.ctx: Context = npu.ctx(0)
        self.small = memory_ops.malloc(self.ctx, 64)  # 96 bytes with padding
        self.out = memory_ops.malloc(self.ctx, 1024)
        self.stream: Stream = self.ctx.create_stream()

    def launch_fault(self, stream: Stream | None = None) -> None:
        """relu over 64 float32 (256 bytes) of a 96-byte allocation: overruns by 160 bytes."""
        self.npu.launch(
            stream or self.stream,
            "relu",
            self.npu.tensor(self.small, (64,), np.float32),
            self.npu.tensor(self.out, (64,), np.float32),
        )

    def fault(self) -> CannError:
        self.launch_fault()
        with pytest.raises(CannError) as info:
            self.stream.synchronize(timeout_ms=100)
        return info.value


def test_a_kernel_fault_raises_the_core_exception_with_a_precise_report(npu: Npu) -> None:
    faulty = Faulty(npu)
    error = faulty.fault()
    assert error.code == FAULT == 507035
    text = str(error)
    assert text.startswith("[RT_VECTOR_CORE_EXCEPTION 507035] The error from device(0), serial number is 1, ")
    assert "there is an error of aicore" in text
    assert "mte error info: 0x1" in text  # MTE_READ_OVERFLOW
    # the user's 64 requested bytes, not the 96 the padding maps
    assert f"read of 256 bytes at 0x{faulty.small:x} ends 192 bytes after the 64-byte allocation at " in text
    assert f"kernel relu on stream {faulty.stream.stream_id}, task 0" in text
    assert sum(line.startswith("sqe[") for line in text.splitlines()) == 16


def test_the_exception_callback_receives_task_stream_device_and_code(npu: Npu) -> None:
    seen: list[ExceptionInfo] = []
    npu.rt.exception_callback = seen.append
    faulty = Faulty(npu)
    npu.spin(faulty.stream, 1000)
    faulty.fault()
    assert seen == [ExceptionInfo(1, faulty.stream.stream_id, seen[0].thread_id, 0, int(FAULT))]


def _later_calls(faulty: Faulty) -> dict[str, Callable[[], Any]]:
    ctx, npu = faulty.ctx, faulty.npu
    host = np.zeros(16, dtype=np.uint8)
    default = ctx.default_stream
    return {
        "launch": lambda: faulty.npu.spin(default, 10),
        "synchronize stream": lambda: default.synchronize(timeout_ms=10),
        "query stream": default.query,
        "synchronize device": lambda: npu.rt.synchronize_device(0, timeout_ms=10),
        "memcpy": lambda: memory_ops.memcpy(ctx, host.ctypes.data, 16, faulty.out, 16, CopyKind.DEVICE_TO_HOST),
        "memcpy_async": lambda: memory_ops.memcpy_async(
            ctx, faulty.out, 16, host.ctypes.data, 16, CopyKind.HOST_TO_DEVICE, default
        ),
        "memset": lambda: memory_ops.memset(ctx, faulty.out, 16, 0, 16),
        "record event": lambda: ctx.create_event().record(default),
        "malloc": lambda: memory_ops.malloc(ctx, 64),
        "create stream": ctx.create_stream,
        "create event": ctx.create_event,
    }


CALLS = [
    "launch",
    "synchronize stream",
    "query stream",
    "synchronize device",
    "memcpy",
    "memcpy_async",
    "memset",
    "record event",
    "malloc",
    "create stream",
    "create event",
]


@pytest.mark.parametrize("call", CALLS)
def test_after_a_kernel_fault_every_later_call_in_the_context_returns_the_same_error(npu: Npu, call: str) -> None:
    faulty = Faulty(npu)
    faulty.fault()
    with pytest.raises(CannError) as info:
        _later_calls(faulty)[call]()
    assert info.value.code == FAULT


def test_the_sticky_error_ends_with_reset_device(npu: Npu) -> None:
    Faulty(npu).fault()
    npu.rt.reset_device(0)
    ctx = npu.ctx(0)
    assert ctx.sticky_code == 0
    stream = ctx.create_stream()
    data = np.arange(8, dtype=np.float32)
    va = npu.upload(data)
    npu.launch(stream, "relu", npu.tensor(va, (8,), np.float32), npu.tensor(va, (8,), np.float32))
    stream.synchronize(timeout_ms=100)
    assert np.array_equal(npu.download(va, 8, np.float32), data)


def test_a_fault_in_one_context_is_not_sticky_in_another_device(npu: Npu) -> None:
    Faulty(npu).fault()
    other = npu.ctx(1)
    stream = other.create_stream()
    npu.spin(stream, 100)
    stream.synchronize(timeout_ms=10)


def _memset_after_a_fault(npu: Npu, stop_on_error: bool) -> tuple[CannError, bytes]:
    faulty = Faulty(npu)
    target = memory_ops.malloc(faulty.ctx, 64)
    faulty.stream.set_failure_mode(stop_on_error)
    gate = faulty.ctx.create_event(0, legacy=True)
    gate.wait_on(faulty.stream)  # hold the stream until everything is queued
    faulty.launch_fault()
    memory_ops.memset(faulty.ctx, target, 64, 0x77, 64, faulty.stream)
    gate.record(faulty.ctx.default_stream)
    with pytest.raises(CannError) as info:
        faulty.stream.synchronize(timeout_ms=100)
    return info.value, npu.read(target, 64)


def test_continue_on_error_is_the_default_and_runs_later_tasks(npu: Npu) -> None:
    error, landed = _memset_after_a_fault(npu, stop_on_error=False)
    assert error.code == FAULT
    assert landed == b"\x77" * 64


def test_stop_on_error_discards_later_tasks_of_the_stream(npu: Npu) -> None:
    error, landed = _memset_after_a_fault(npu, stop_on_error=True)
    assert error.code == FAULT
    assert landed == bytes(64)


def test_stop_on_error_only_affects_its_own_stream(npu: Npu) -> None:
    faulty = Faulty(npu)
    faulty.stream.set_failure_mode(True)
    bystander = faulty.ctx.create_stream()
    target = memory_ops.malloc(faulty.ctx, 64)
    faulty.launch_fault()
    npu.spin(bystander, 1000)
    memory_ops.memset(faulty.ctx, target, 64, 0x42, 64, bystander)
    with pytest.raises(CannError):
        faulty.stream.synchronize(timeout_ms=100)
    with pytest.raises(CannError) as info:
        bystander.synchronize(timeout_ms=100)  # waits, then reports the context's sticky error
    assert info.value.code == FAULT
    assert npu.read(target, 64) == b"\x42" * 64


def test_a_sticky_error_refuses_even_a_prepared_launch(npu: Npu) -> None:
    from cannrt.api import Stream as ApiStream

    faulty = Faulty(npu)
    other = ApiStream._wrap(faulty.ctx.create_stream())
    other.launch("nop")
    other.launch("nop")  # the prepared path from here on
    faulty.fault()
    with pytest.raises(CannError) as info:
        other.launch("nop")
    assert info.value.code == FAULT
