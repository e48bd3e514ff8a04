"""Bad input raises CannError with the right code, and nothing is enqueued."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cannrt import CannError, Device, ErrorCode, Stream
from cannrt.runtime.core import Runtime


class Scene:
    """A device with a stream and a few arrays; `enqueued()` counts what reached the device."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.device = Device(0)
        self.stream = self.device.stream()
        self.x = self.device.array(np.ones((4, 4), np.float32))
        self.y = self.device.empty((4, 4), np.float32)
        self.small = self.device.empty((3,), np.float32)
        self.half = self.device.empty((4, 4), np.float16)
        self.ints = self.device.empty((4, 4), np.int32)
        self.freed = self.device.empty((4, 4), np.float32)
        self.freed.free()
        self.foreign = Device(1).empty((4, 4), np.float32)
        Device(0).use()
        rt.driver.trace_start(0)

    def enqueued(self) -> int:
        """Tasks submitted to the stream (all of them complete once synchronised)."""
        self.stream.synchronize(timeout_ms=100)
        tasks = [
            r for r in self.rt.driver.trace_stop(0, self.rt.host_time_ns) if r.stream_id == self.stream._rt.stream_id
        ]
        assert len(tasks) == self.stream._rt.tail
        return len(tasks)


def _launch(name: str, *args: Any, block_dim: int = 1) -> Callable[[Scene], None]:
    def call(scene: Scene) -> None:
        resolved = [getattr(scene, a) if isinstance(a, str) and hasattr(scene, a) else a for a in args]
        scene.stream.launch(name, *resolved, block_dim=block_dim)

    return call


BAD_LAUNCHES = {
    "unknown kernel": (_launch("no_such_kernel", "x"), ErrorCode.RT_KERNEL_LOOKUP),
    "block_dim 0": (_launch("relu", "x", "y", block_dim=0), ErrorCode.RT_PARAM_INVALID),
    "block_dim over 65535": (_launch("relu", "x", "y", block_dim=65536), ErrorCode.RT_PARAM_INVALID),
    "block_dim not an int": (_launch("relu", "x", "y", block_dim=2.0), ErrorCode.RT_PARAM_INVALID),  # type: ignore[arg-type]
    "too few tensors": (_launch("add", "x", "y"), ErrorCode.RT_PARAM_INVALID),
    "a scalar where a tensor goes": (_launch("add", "x", 1.0, "y"), ErrorCode.RT_PARAM_INVALID),
    "shapes that do not broadcast": (_launch("add", "x", "small", "y"), ErrorCode.RT_PARAM_INVALID),
    "an unsupported argument type": (_launch("relu", "x", "y", "text"), ErrorCode.RT_PARAM_INVALID),
    "a list argument": (_launch("relu", "x", [1, 2]), ErrorCode.RT_PARAM_INVALID),
    "matmul dtype mismatch": (_launch("matmul", "x", "half", "y"), ErrorCode.RT_PARAM_INVALID),
    "matmul shape mismatch": (_launch("matmul", "x", "x", "small"), ErrorCode.RT_PARAM_INVALID),
    "matmul on int32": (_launch("matmul", "ints", "ints", "ints"), ErrorCode.RT_PARAM_INVALID),
    "softmax axis out of range": (_launch("softmax", "x", "y", 2), ErrorCode.RT_PARAM_INVALID),
    "gelu into integers": (_launch("gelu", "x", "ints"), ErrorCode.RT_PARAM_INVALID),
    "negative spin": (_launch("spin", -1), ErrorCode.RT_PARAM_INVALID),
    "nop with an argument": (_launch("nop", 1), ErrorCode.RT_PARAM_INVALID),
    "a freed array": (_launch("relu", "freed", "y"), ErrorCode.RT_PARAM_INVALID),
    "an array of another device": (_launch("relu", "foreign", "y"), ErrorCode.RT_STREAM_CONTEXT),
}


@pytest.mark.parametrize("case", sorted(BAD_LAUNCHES))
def test_a_bad_launch_raises_its_code_and_enqueues_nothing(rt: Runtime, case: str) -> None:
    scene = Scene(rt)
    call, code = BAD_LAUNCHES[case]
    with pytest.raises(CannError) as info:
        call(scene)
    assert info.value.code == code
    assert scene.enqueued() == 0


@pytest.mark.parametrize("args", [("x", "x", "y", 3), ("x", "y", 2.0)], ids=["add+int", "relu+float"])
def test_surplus_arguments_are_refused_at_launch(rt: Runtime, args: tuple[Any, ...]) -> None:
    scene = Scene(rt)
    with pytest.raises(CannError) as info:
        _launch("add" if len(args) == 4 else "relu", *args)(scene)
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert scene.enqueued() == 0


def test_a_destroyed_stream_refuses_launches_and_copies(rt: Runtime) -> None:
    scene = Scene(rt)
    stream = scene.device.stream()
    stream.destroy()
    for call in (
        lambda: stream.launch("relu", scene.x, scene.y),
        lambda: scene.x.copy_from(np.ones((4, 4), np.float32), stream),
        lambda: scene.x.to_numpy(stream),
        lambda: stream.record(),
        stream.synchronize,
    ):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == ErrorCode.RT_INVALID_HANDLE


def test_copies_with_a_stream_of_another_device_are_107003(rt: Runtime) -> None:
    scene = Scene(rt)
    foreign_stream = Device(1).stream()
    host = np.ones((4, 4), np.float32)
    for call in (
        lambda: scene.x.copy_from(host, foreign_stream),
        lambda: scene.x.copy_to(np.empty_like(host), foreign_stream),
        lambda: scene.x.to_numpy(foreign_stream),
        lambda: Device(0).array(host, stream=foreign_stream),
    ):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == ErrorCode.RT_STREAM_CONTEXT
    foreign_stream.synchronize(timeout_ms=10)
    assert foreign_stream._rt.tail == 0


def test_waiting_on_an_event_of_another_device_is_107003(rt: Runtime) -> None:
    scene = Scene(rt)
    foreign = Device(1).event()
    with pytest.raises(CannError) as info:
        scene.stream.wait(foreign)
    assert info.value.code == ErrorCode.RT_STREAM_CONTEXT
    with pytest.raises(CannError) as info:
        scene.stream.record(foreign)
    assert info.value.code == ErrorCode.RT_STREAM_CONTEXT
    assert scene.enqueued() == 0


def test_an_array_of_a_dtype_the_npu_does_not_have_is_107000(rt: Runtime) -> None:
    device = Device(0)
    for call in (lambda: device.empty(4, np.complex64), lambda: device.array(np.zeros(3, np.complex64))):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_a_stream_of_a_device_that_does_not_exist(rt: Runtime) -> None:
    with pytest.raises(CannError) as info:
        Stream(Device(5))
    assert info.value.code == ErrorCode.RT_INVALID_DEVICEID
