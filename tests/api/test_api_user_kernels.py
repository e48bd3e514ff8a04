"""User kernels registered with cannrt.register_kernel run exactly like the built-ins: their check
guards the launch, their compute produces the data, their work model drives the modelled time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import cannrt
from cannrt import CannError, Device, ErrorCode, Kernel, KernelArgumentError, Work, kernel_names, register_kernel
from cannrt.abi import CoreKind, SqeType, TensorArg
from cannrt.config import DeviceCosts
from cannrt.kernels.registry import ArgSpecs, require_tensors
from cannrt.runtime.core import Runtime

COSTS = DeviceCosts()


def _saxpy(x: np.ndarray, y: np.ndarray, out: np.ndarray, a: float) -> None:
    out[...] = a * x + y


def _check_saxpy(specs: ArgSpecs) -> None:
    x, y, out = require_tensors("test_saxpy", specs, 3, scalars=1)
    if not (x.shape == y.shape == out.shape):
        raise KernelArgumentError(f"test_saxpy: shapes {x.shape}, {y.shape}, {out.shape} differ")
    if len(specs) != 4 or not isinstance(specs[3], float):
        raise KernelArgumentError("test_saxpy: the fourth argument is the float a")


def _saxpy_work(specs: ArgSpecs) -> Work:
    out = specs[2]
    assert isinstance(out, TensorArg)
    n = int(np.prod(out.shape))
    return Work(vector_ops=2 * n, bytes_read=8 * n, bytes_written=4 * n, fixed_ns=50_000)


@pytest.fixture(autouse=True)
def _user_kernels() -> None:
    register_kernel(Kernel("test_saxpy", _saxpy, _saxpy_work, _check_saxpy, outputs=(2,)), replace=True)


def test_a_registered_kernel_is_listed_and_computes_like_its_numpy_body(rt: Runtime) -> None:
    assert "test_saxpy" in kernel_names()
    device = Device(0)
    stream = device.stream()
    x, y = np.arange(100, dtype=np.float32), np.full(100, 0.5, np.float32)
    out = device.empty(100)
    stream.launch("test_saxpy", device.array(x), device.array(y), out, 3.0, block_dim=4)
    assert np.array_equal(out.to_numpy(stream), 3.0 * x + y)


def test_the_kernels_own_check_guards_the_launch(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    x, short = device.empty(10), device.empty(9)
    for args in ((x, x, short, 1.0), (x, x, x, 2)):
        with pytest.raises(CannError) as info:
            stream.launch("test_saxpy", *args)
        assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert stream._rt.tail == 0


def test_a_name_can_be_registered_once_unless_replaced() -> None:
    kernel = Kernel("test_saxpy", _saxpy, _saxpy_work, _check_saxpy, outputs=(2,))
    with pytest.raises(ValueError, match="already registered"):
        register_kernel(kernel)
    assert register_kernel(kernel, replace=True) is kernel
    assert cannrt.register_kernel is register_kernel


def test_the_work_model_drives_the_modelled_duration(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    x = device.empty(1024)
    rt.driver.trace_start(0)
    stream.launch("test_saxpy", x, x, x, 1.0, block_dim=1)
    stream.synchronize()
    (record,) = [r for r in rt.driver.trace_stop(0, rt.host_time_ns) if r.sqe_type == SqeType.KERNEL]
    assert record.name == "test_saxpy"
    duration = record.end_ns - record.start_ns - COSTS.dispatch_ns
    assert 50_000 <= duration < 51_000  # the fixed 50 us plus a tiny roofline for 1024 elements
    assert (record.bytes_read, record.bytes_written) == (8 * 1024, 4 * 1024)


@pytest.mark.parametrize(
    ("kind", "code", "cores"),
    [
        (CoreKind.AIVEC, ErrorCode.RT_VECTOR_CORE_EXCEPTION, range(48)),
        (CoreKind.AICORE, ErrorCode.RT_AICORE_EXCEPTION, range(24)),
    ],
)
def test_a_kernel_that_raises_is_a_core_exception_of_its_engine(
    rt: Runtime, kind: CoreKind, code: ErrorCode, cores: range
) -> None:
    def broken(out: np.ndarray) -> None:
        raise ZeroDivisionError("user bug")

    register_kernel(
        Kernel("test_broken", broken, lambda specs: Work(), lambda specs: None, outputs=(0,), core_kind=kind),
        replace=True,
    )
    device = Device(0)
    stream = device.stream()
    rt.driver.trace_start(0)
    stream.launch("test_broken", device.empty(4), block_dim=2)
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=100)
    assert info.value.code == code
    assert "ZeroDivisionError('user bug')" in str(info.value)
    assert "CCU_ILLEGAL_INSTR" in str(info.value)
    (record,) = [r for r in rt.driver.trace_stop(0, rt.host_time_ns) if r.sqe_type == SqeType.KERNEL]
    assert set(record.cores) <= set(cores) and record.status == code


def test_a_replaced_kernel_is_used_by_later_launches(rt: Runtime) -> None:
    def fill(value: int) -> Callable[[np.ndarray], None]:
        def body(out: np.ndarray) -> None:
            out.fill(value)

        return body

    device = Device(0)
    out = device.empty(4, np.int32)
    register_kernel(Kernel("test_fill", fill(1), lambda s: Work(), lambda s: None, outputs=(0,)), replace=True)
    stream = device.stream()
    stream.launch("test_fill", out)
    assert out.to_numpy(stream).tolist() == [1] * 4
    register_kernel(Kernel("test_fill", fill(2), lambda s: Work(), lambda s: None, outputs=(0,)), replace=True)
    device.stream().launch("test_fill", out)
    device.synchronize()
    assert out.to_numpy().tolist() == [2] * 4
