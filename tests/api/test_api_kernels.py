"""Built-in kernels against numpy references, including matmul on fp16/bf16 with fp32 accumulation."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt import Device, kernel_names
from cannrt.dtypes import BFLOAT16
from cannrt.runtime.core import Runtime


def _run(
    kernel: str, *arrays: np.ndarray, out: np.ndarray, scalars: tuple[float | int, ...] = (), block_dim: int = 4
) -> np.ndarray:
    """Launch kernel on device 0 with arrays as inputs and a device buffer shaped like out."""
    device = Device(0)
    stream = device.stream()
    inputs = [device.array(a) for a in arrays]
    result = device.empty(out.shape, out.dtype)
    stream.launch(kernel, *inputs, result, *scalars, block_dim=block_dim)
    return result.to_numpy(stream)


def _rand(shape: tuple[int, ...], dtype: object = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))


def test_the_built_in_kernels_are_registered() -> None:
    assert {"add", "mul", "relu", "gelu", "softmax", "matmul", "cast", "spin", "nop"} <= set(kernel_names())


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.float64])
def test_add_and_mul_match_numpy(rt: Runtime, dtype: type) -> None:
    x, y = _rand((64, 33), dtype, 1), _rand((64, 33), dtype, 2)
    assert np.array_equal(_run("add", x, y, out=np.empty_like(x)), x + y)
    assert np.array_equal(_run("mul", x, y, out=np.empty_like(x)), x * y)


def test_elementwise_inputs_broadcast_to_the_output(rt: Runtime) -> None:
    col, row = _rand((4, 1), seed=3), _rand((1, 5), seed=4)
    assert np.array_equal(_run("add", col, row, out=np.empty((4, 5), np.float32)), col + row)


def test_add_wraps_like_numpy_on_integers(rt: Runtime) -> None:
    big = np.array([2**31 - 1, -(2**31)], dtype=np.int32)
    one = np.array([1, -1], dtype=np.int32)
    assert _run("add", big, one, out=np.empty(2, np.int32)).tolist() == [-(2**31), 2**31 - 1]


def test_relu_matches_numpy(rt: Runtime) -> None:
    x = _rand((1000,), seed=5)
    assert np.array_equal(_run("relu", x, out=np.empty_like(x)), np.maximum(x, 0))


@pytest.mark.parametrize(("dtype", "tolerance"), [(np.float32, 1e-6), (np.float16, 2e-3), (BFLOAT16, 2e-2)])
def test_gelu_matches_the_tanh_approximation(rt: Runtime, dtype: object, tolerance: float) -> None:
    x = np.linspace(-6, 6, 2001).astype(dtype)
    got = _run("gelu", x, out=np.empty_like(x)).astype(np.float64)
    assert np.allclose(got, _gelu_tanh(x), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_numpy_along_its_axis(rt: Runtime, axis: int) -> None:
    x = _rand((16, 40), seed=6) * 10
    got = _run("softmax", x, out=np.empty_like(x), scalars=(axis,))
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    assert np.allclose(got, e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.allclose(got.sum(axis=axis), 1.0, atol=1e-5)


def test_softmax_is_stable_for_large_inputs(rt: Runtime) -> None:
    x = np.array([[1000.0, 1000.0], [-1000.0, 0.0]], dtype=np.float32)
    assert _run("softmax", x, out=np.empty_like(x)).tolist() == [[0.5, 0.5], [0.0, 1.0]]


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (np.float32, np.float16),
        (np.float32, BFLOAT16),
        (np.float16, np.float32),
        (np.float32, np.int32),
        (np.int32, np.float64),
        (BFLOAT16, np.float32),
        (np.float32, np.bool_),
    ],
)
def test_cast_matches_numpy_astype(rt: Runtime, src: object, dst: object) -> None:
    x = (_rand((50,), seed=7) * 100).astype(src)
    got = _run("cast", x, out=np.empty(50, dst))
    assert got.tobytes() == x.astype(dst).tobytes()


def test_matmul_fp32_matches_numpy(rt: Runtime) -> None:
    a, b = _rand((70, 50), seed=8), _rand((50, 90), seed=9)
    assert np.allclose(_run("matmul", a, b, out=np.empty((70, 90), np.float32)), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("out_dtype", [np.float32, "same"], ids=["fp32-out", "same-out"])
def test_matmul_half_inputs_accumulate_in_fp32(rt: Runtime, dtype: object, out_dtype: object) -> None:
    out = np.dtype(dtype if out_dtype == "same" else out_dtype)
    a, b = _rand((33, 300), dtype, 10), _rand((300, 17), dtype, 11)
    reference = (a.astype(np.float32) @ b.astype(np.float32)).astype(out)
    got = _run("matmul", a, b, out=np.empty((33, 17), out))
    assert got.dtype == out
    assert got.tobytes() == reference.tobytes()


@pytest.mark.parametrize(("dtype", "k", "stalls_at"), [(np.float16, 4096, 2048), (BFLOAT16, 1024, 256)])
def test_a_long_dot_product_of_ones_is_exact_thanks_to_fp32_accumulation(
    rt: Runtime, dtype: object, k: int, stalls_at: int
) -> None:
    """Summed in the input precision, 1 + 1 + ... stops growing at `stalls_at`; in fp32 it reaches k."""
    ones_a, ones_b = np.ones((2, k), dtype), np.ones((k, 3), dtype)
    assert np.float32(np.array(stalls_at, dtype) + np.array(1, dtype)) == stalls_at  # the half-precision trap
    for out in (np.float32, dtype):
        got = _run("matmul", ones_a, ones_b, out=np.empty((2, 3), out))
        assert got.astype(np.float32).tolist() == [[float(k)] * 3] * 2


def test_matmul_int8_accumulates_in_int32(rt: Runtime) -> None:
    a = np.full((4, 64), 127, np.int8)
    b = np.full((64, 4), 127, np.int8)
    assert _run("matmul", a, b, out=np.empty((4, 4), np.int32)).tolist() == [[127 * 127 * 64] * 4] * 4


@pytest.mark.parametrize("block_dim", [1, 3, 24, 100])
def test_block_dim_changes_the_schedule_not_the_result(rt: Runtime, block_dim: int) -> None:
    x, y = _rand((300, 70), seed=12), _rand((70, 41), seed=13)
    assert np.array_equal(_run("add", x, x, out=np.empty_like(x), block_dim=block_dim), x + x)
    reference = _run("matmul", x, y, out=np.empty((300, 41), np.float32), block_dim=1)
    assert np.array_equal(_run("matmul", x, y, out=np.empty((300, 41), np.float32), block_dim=block_dim), reference)


def test_spin_and_nop_touch_no_memory(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    start = stream.record()
    stream.launch("spin", 1_000_000, block_dim=2)
    stream.launch("nop", block_dim=8)
    end = stream.record()
    end.synchronize()
    assert start.elapsed_ms(end) > 1.0
