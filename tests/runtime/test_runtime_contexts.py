"""Contexts: the current context is per thread, each context has its own default stream and its own
address space (isolation), objects of one device cannot be used with another."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from cannrt import CannError, ErrorCode
from cannrt.abi import CopyKind
from cannrt.runtime import memory_ops

if TYPE_CHECKING:
    from conftest import Npu


def _in_thread(fn: Any) -> Any:
    """Run fn on a fresh thread (bounded) and return its result or raise its exception."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_a_new_thread_has_no_current_context(npu: Npu) -> None:
    npu.ctx(0)
    with pytest.raises(CannError) as info:
        _in_thread(npu.rt.current_context)
    assert info.value.code == 107002 == ErrorCode.RT_CONTEXT_NULL


def test_the_current_context_is_per_thread(npu: Npu) -> None:
    main_ctx = npu.ctx(0)
    other = _in_thread(lambda: npu.rt.set_device(1))
    assert other.device_id == 1
    assert npu.rt.current_context() is main_ctx  # the other thread's set_device did not move ours
    assert _in_thread(lambda: (npu.rt.set_context(main_ctx), npu.rt.current_context())[1]) is main_ctx


def test_set_device_again_returns_the_same_default_context(npu: Npu) -> None:
    first = npu.rt.set_device(0)
    npu.rt.set_device(1)
    assert npu.rt.set_device(0) is first and first.is_default


def test_set_device_of_a_device_that_does_not_exist_is_107001(npu: Npu) -> None:
    for bad in (2, -1):
        with pytest.raises(CannError) as info:
            npu.rt.set_device(bad)
        assert info.value.code == 107001 == ErrorCode.RT_INVALID_DEVICEID


def test_create_context_makes_it_current_with_its_own_default_stream_and_memory(npu: Npu) -> None:
    first = npu.ctx(0)
    second = npu.rt.create_context(0)
    assert npu.rt.current_context() is second
    assert second.default_stream is not first.default_stream
    assert second.default_stream.is_default
    assert second.asid != first.asid
    npu.rt.set_context(first)
    assert npu.rt.current_context() is first


def test_a_destroyed_context_cannot_be_used(npu: Npu) -> None:
    ctx = npu.rt.create_context(0)
    npu.rt.destroy_context(ctx)
    for call in (
        npu.rt.current_context,
        lambda: npu.rt.set_context(ctx),
        lambda: memory_ops.malloc(ctx, 64),
        ctx.create_stream,
        lambda: npu.rt.destroy_context(ctx),
    ):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == 107002


def test_a_default_context_is_not_destroyed_by_destroy_context(npu: Npu) -> None:
    with pytest.raises(CannError) as info:
        npu.rt.destroy_context(npu.ctx(0))
    assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_a_kernel_touching_another_contexts_memory_faults(npu: Npu) -> None:
    mine = npu.ctx(0)
    theirs = npu.upload(np.arange(4, dtype=np.float32))
    other = npu.rt.create_context(0)
    out = memory_ops.malloc(other, 16)
    stream = other.create_stream()
    npu.launch(stream, "relu", npu.tensor(theirs, (4,), np.float32), npu.tensor(out, (4,), np.float32))
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=100)
    assert info.value.code == ErrorCode.RT_VECTOR_CORE_EXCEPTION
    assert "MTE_READ_OVERFLOW" in str(info.value)
    assert mine.sticky_code == 0  # the owner's context is unharmed


def test_the_isolation_fault_report_names_the_owning_context(npu: Npu) -> None:
    mine = npu.ctx(0)
    theirs = npu.upload(np.arange(4, dtype=np.float32))
    other = npu.rt.create_context(0)
    out = memory_ops.malloc(other, 16)
    stream = other.create_stream()
    npu.launch(stream, "relu", npu.tensor(theirs, (4,), np.float32), npu.tensor(out, (4,), np.float32))
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=100)
    assert f"address belongs to address space {mine.asid}, not {other.asid}" in str(info.value)


def test_copies_with_another_contexts_memory_are_refused(npu: Npu) -> None:
    npu.ctx(0)
    theirs = npu.upload(np.arange(16, dtype=np.uint8))
    other = npu.rt.create_context(0)
    mine = memory_ops.malloc(other, 16)
    with pytest.raises(CannError) as info:
        memory_ops.memcpy(other, mine, 16, theirs, 16, CopyKind.DEVICE_TO_DEVICE)
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert "belongs to another context" in str(info.value)


def test_async_copies_and_memsets_on_a_stream_of_another_device_are_107003(npu: Npu) -> None:
    ctx0 = npu.ctx(0)
    foreign = npu.ctx(1).create_stream()
    src = npu.upload(np.arange(16, dtype=np.uint8), device=0)
    dst = memory_ops.malloc(ctx0, 16)
    calls = [
        lambda: memory_ops.memcpy_async(ctx0, dst, 16, src, 16, CopyKind.DEVICE_TO_DEVICE, foreign),
        lambda: memory_ops.memset(ctx0, dst, 16, 1, 16, foreign),
    ]
    for call in calls:
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == 107003 == ErrorCode.RT_STREAM_CONTEXT
    assert foreign.tail == 0


def test_a_finalized_runtime_refuses_set_device_with_100001(npu: Npu) -> None:
    npu.rt.close()
    with pytest.raises(CannError) as info:
        npu.rt.set_device(0)
    assert info.value.code == 100001 == ErrorCode.UNINITIALIZE
