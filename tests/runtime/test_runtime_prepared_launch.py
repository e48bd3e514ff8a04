"""Held launches (Launcher.prepare, what a model's replay uses) and kept senders of launches with
scalar arguments: the same tasks, on the same modelled timestamps, as launches through the
checks, and the checks again after whatever drops the senders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from launch_helpers import SQ_DEPTH, dumped_ops, kernel_records, small_ring

import cannrt
from cannrt import CannError, ErrorCode, Kernel, Work, register_kernel
from cannrt.abi import TensorArg
from cannrt.dtypes import acl_code
from cannrt.kernels.registry import get_kernel
from cannrt.runtime import memory_ops as mo
from cannrt.runtime.context import Context
from cannrt.runtime.core import Runtime, tensor_arg
from cannrt.runtime.launch import Launcher
from cannrt.runtime.stream import Stream

F32 = acl_code(np.dtype(np.float32))


def _tensors(ctx: Context, count: int, n: int = 64) -> list[TensorArg]:
    """count float32 tensors of n elements, filled with 1, 2, ..."""
    made = []
    for index in range(count):
        va = mo.malloc(ctx, 4 * n)
        host = np.full(n, index + 1, np.float32)
        mo.memcpy(ctx, va, host.nbytes, host.ctypes.data, host.nbytes, cannrt.abi.CopyKind.HOST_TO_DEVICE)
        made.append(tensor_arg(va, F32, (n,)))
    return made


def _read(ctx: Context, arg: TensorArg) -> np.ndarray:
    out = np.empty(arg.shape, np.float32)
    mo.memcpy(ctx, out.ctypes.data, out.nbytes, arg.address, out.nbytes, cannrt.abi.CopyKind.DEVICE_TO_HOST)
    return out


def _program(ctx: Context) -> list[tuple[str, int, tuple[object, ...]]]:
    """Launches with tensors only, with scalars (int, float, bool, 0.0 and -0.0), block_dim > 1."""
    x, y, z, w = _tensors(ctx, 4)
    return [
        ("add", 1, (x, y, z)),
        ("softmax", 2, (x, w, 0)),
        ("add", 4, (z, y, x)),
        ("softmax", 2, (y, w, 0)),
        ("test_scalar", 1, (w, 1)),
        ("test_scalar", 1, (w, 1.0)),
        ("test_scalar", 1, (w, True)),
        ("test_scalar", 1, (w, 0.0)),
        ("test_scalar", 1, (w, -0.0)),
    ]


@pytest.fixture
def _scalar_kernel() -> None:
    def body(out: np.ndarray, value: object) -> None:
        out[:] = np.float32(np.copysign(3.0, value) if isinstance(value, float) else 2.0 + int(value))  # type: ignore[call-overload]

    register_kernel(
        Kernel("test_scalar", body, lambda s: Work(fixed_ns=700), lambda s: None, outputs=(0,)), replace=True
    )


def _timeline(rt: Runtime, how: str) -> list[tuple[int, int, int, tuple[object, ...]]]:
    """(start, end, task id, args) of each kernel task of the program launched three times."""
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    program = _program(ctx)
    held = [stream.launcher.prepare(name, block_dim, args) for name, block_dim, args in program]
    with cannrt.profile() as prof:
        for _ in range(3):
            for (name, block_dim, args), launch in zip(program, held, strict=True):
                if how == "checked":
                    stream.launcher.invalidate()  # no sender: every launch goes through the checks
                    stream.launcher.launch(name, block_dim, args)
                elif how == "launch":
                    stream.launcher.launch(name, block_dim, args)  # kept senders, found by key
                else:
                    launch()
        stream.synchronize()
    return [(r.start_ns, r.end_ns, r.task_id, r.args) for r in kernel_records(prof)]


def test_held_kept_and_checked_launches_give_the_same_tasks_at_the_same_times(
    make_runtime: object, _scalar_kernel: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: dict[str, list[str]] = {"checked": [], "launch": [], "held": []}
    real = Launcher._launch_checked
    checking = checks["checked"]

    def counted(self: Launcher, name: str, *args: Any) -> int:
        checking.append(name)
        return real(self, name, *args)

    monkeypatch.setattr(Launcher, "_launch_checked", counted)
    runs = {}
    for how in checks:
        checking = checks[how]
        runs[how] = _timeline(make_runtime(), how)  # type: ignore[operator]
    assert len(runs["checked"]) == len(checks["checked"]) == 27
    assert len(checks["launch"]) == len(checks["held"]) == 9  # the first launch of each shape
    assert runs["launch"] == runs["checked"]
    assert runs["held"] == runs["checked"]
    scalars = [r[3][1] for r in runs["held"][4:9]]
    assert [(type(v), v) for v in scalars] == [(int, 1), (float, 1.0), (int, 1), (float, 0.0), (float, -0.0)]
    assert [np.copysign(1.0, v) for v in scalars[3:]] == [1.0, -1.0]


def test_a_scalar_launch_repeated_is_sent_by_its_kept_sender(rt: Runtime, _scalar_kernel: None) -> None:
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    (w,) = _tensors(ctx, 1)
    for value in (0.0, -0.0, 0.0, -0.0):
        stream.launcher.launch("test_scalar", 1, (w, value))
        stream.synchronize()
        assert _read(ctx, w)[0] == np.copysign(3.0, value)
    assert len(stream.launcher.senders) == 2  # one per parameter block


def _held_add(rt: Runtime) -> tuple[Context, Stream, list[TensorArg], object]:
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    x, y, z = _tensors(ctx, 3)
    launch = stream.launcher.prepare("add", 1, (x, y, z), "node_add")
    launch()
    stream.synchronize()
    return ctx, stream, [x, y, z], launch


def test_a_held_launch_runs_a_replaced_kernel(rt: Runtime) -> None:
    ctx, stream, (_, _, z), launch = _held_add(rt)
    original = get_kernel("add")
    try:
        register_kernel(Kernel("add", lambda a, b, c: c.__setitem__(..., a - b), original.work, original.check,
                               outputs=(2,), core_kind=original.core_kind), replace=True)  # fmt: skip
        launch()  # type: ignore[operator]
        stream.synchronize()
        assert (_read(ctx, z) == -1.0).all()
    finally:
        register_kernel(original, replace=True)


def test_a_held_launch_on_a_destroyed_stream_is_refused(rt: Runtime) -> None:
    _, stream, _, launch = _held_add(rt)
    stream.destroy()
    with pytest.raises(CannError) as info:
        launch()  # type: ignore[operator]
    assert info.value.code == ErrorCode.RT_INVALID_HANDLE


def test_a_held_launch_is_refused_under_a_sticky_error(rt: Runtime) -> None:
    ctx, stream, _, launch = _held_add(rt)
    ctx.sticky_code, ctx.sticky_message = int(ErrorCode.RT_AICORE_EXCEPTION), "an earlier fault"
    ctx.invalidate_launches()  # what recording a sticky error does
    tail = stream.tail
    with pytest.raises(CannError) as info:
        launch()  # type: ignore[operator]
    assert info.value.code == ErrorCode.RT_AICORE_EXCEPTION
    assert stream.tail == tail


def test_a_held_launch_is_dumped_under_its_op_name_once_dumping_starts(rt: Runtime, tmp_path: Path) -> None:
    _, stream, _, launch = _held_add(rt)
    with cannrt.dump(tmp_path, ops={"node_add"}) as dumped:
        launch()  # type: ignore[operator]
        stream.synchronize()
    assert dumped_ops(dumped.files) == ["node_add"]


def test_held_launches_of_more_shapes_than_slots_each_send_their_own_arguments(
    make_runtime: object,
) -> None:
    runtime: Runtime = small_ring(make_runtime)  # type: ignore[arg-type]
    ctx = runtime.set_device(0)
    stream = ctx.create_stream()
    tensors = _tensors(ctx, 2 * SQ_DEPTH + 1)
    outs = _tensors(ctx, 2 * SQ_DEPTH)
    held = [stream.launcher.prepare("add", 1, (tensors[i], tensors[i + 1], outs[i])) for i in range(2 * SQ_DEPTH)]
    for _ in range(3):  # every round drops shapes to make slots for others
        for launch in held:
            launch()
    stream.synchronize()
    assert [float(_read(ctx, out)[0]) for out in outs] == [2.0 * i + 3 for i in range(2 * SQ_DEPTH)]


def test_a_held_launch_goes_through_the_checks_once_after_a_change_then_by_its_new_sender(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    real = Launcher._launch_checked

    def counted(self: Launcher, name: str, *args: Any) -> int:
        checked.append(name)
        return real(self, name, *args)

    monkeypatch.setattr(Launcher, "_launch_checked", counted)
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    x, y, z = _tensors(ctx, 3)
    launch = stream.launcher.prepare("add", 1, (x, y, z))
    for _ in range(3):
        launch()
    assert len(checked) == 1
    register_kernel(Kernel("test_unrelated", lambda: None, lambda s: Work(), lambda s: None, outputs=()), replace=True)
    for _ in range(3):  # the registry's generation moved
        launch()
    assert len(checked) == 2
    stream.launcher.clear()  # every shape dropped (as for room in the argument area)
    for _ in range(3):
        launch()
    assert len(checked) == 3
    stream.synchronize()
    assert (_read(ctx, z) == 3.0).all()
