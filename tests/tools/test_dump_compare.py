"""Dump and accuracy compare: files as CANN names them, msprobe's metrics, the first divergent op."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import cannrt
from cannrt.abi import TensorArg
from cannrt.cli.app import app
from cannrt.kernels import Kernel, Work, register_kernel
from cannrt.tools.compare import accuracy_reached, compare_dirs, first_divergent, tensor_metrics
from cannrt.tools.dump import load_dump, load_dump_dir
from cannrt.tools.reference import write_reference_dump

NAME = re.compile(r"^(?P<type>\w+)\.(?P<op>[\w\-]+)\.(?P<n>\d+)\.(?P<task>\d+)\.(?P<stream>\d+)\.(?P<ts>\d+)$")


def _inputs(device: cannrt.Device) -> tuple[cannrt.DeviceArray, cannrt.DeviceArray]:
    rng = np.random.default_rng(3)
    x = device.array(rng.standard_normal((32, 32)).astype(np.float16))
    w = device.array((rng.standard_normal((32, 32)) / 6).astype(np.float16))
    return x, w


def _chain(device: cannrt.Device, activation: str = "gelu") -> cannrt.Stream:
    x, w = _inputs(device)
    y, z, p = device.empty((32, 32), np.float32), device.empty((32, 32), np.float32), device.empty((32, 32))
    stream = device.stream()
    stream.launch("matmul", x, w, y, block_dim=2, name="fc1")
    stream.launch(activation, y, z, block_dim=2, name="act")
    stream.launch("softmax", z, p, -1, block_dim=2, name="prob")
    return stream


def test_each_dumped_kernel_is_one_file_named_as_cann_names_it(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path) as result:
        _chain(device)
    names = sorted(f.name for f in result.files)
    assert [NAME.match(n)["op"] for n in names] == ["act", "fc1", "prob"]  # type: ignore[index]
    assert all(f.parent == tmp_path / "0" for f in result.files)
    matmul = load_dump(next(f for f in result.files if ".fc1." in f.name))
    assert [(t.label, str(t.dtype), t.shape) for t in matmul.tensors] == [
        ("input.0", "float16", (32, 32)), ("input.1", "float16", (32, 32)), ("output.2", "float32", (32, 32)),
    ]  # fmt: skip
    a, b, out = (t.array for t in matmul.tensors)
    assert a is not None and b is not None and out is not None
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-6)


def test_ops_load_back_in_execution_order(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path):
        _chain(device)
    assert [op.op_name for op in load_dump_dir(tmp_path)] == ["fc1", "act", "prob"]


def test_the_dump_list_and_mode_choose_what_is_written(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path / "some", ops={"act"}, mode="output"):
        _chain(device)
    ops = load_dump_dir(tmp_path / "some")
    assert [(op.op_name, [t.label for t in op.tensors]) for op in ops] == [("act", ["output.1"])]


def test_stats_only_dumps_keep_statistics_but_no_tensor_data(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path, ops={"fc1"}, data="stats"):
        _chain(device)
    (op,) = load_dump_dir(tmp_path)
    assert all(t.array is None and set(t.stats) == {"max", "min", "mean", "l2norm"} for t in op.tensors)


def test_a_faulting_kernel_leaves_an_exception_dump(device: cannrt.Device, tmp_path: Path) -> None:
    x = device.array(np.ones(8, np.float32))
    out = device.empty(16, np.float32)
    stream = device.stream()
    with pytest.raises(cannrt.CannError), cannrt.dump(tmp_path, ops=set()):
        bad = cannrt.DeviceArray(device, x.address + 64, (16,), np.dtype(np.float32), owned=False)
        stream.launch("relu", bad, out)
    (op,) = load_dump_dir(tmp_path)
    assert op.exception and op.status == cannrt.ErrorCode.RT_VECTOR_CORE_EXCEPTION
    assert op.role("input")[0].array is None  # the faulting address could not be read
    assert op.role("output")[0].array is not None


def test_a_second_dump_inside_a_dump_is_refused(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path / "a"), pytest.raises(cannrt.CannError) as info, cannrt.dump(tmp_path / "b"):
        pass
    assert info.value.code == cannrt.ErrorCode.DUMP_ALREADY_RUN


def test_metrics_follow_msprobe_definitions() -> None:
    bench = np.array([1.0, 2.0, 0.0, 4.0])
    npu = np.array([1.0, 2.004, 0.0, 4.0])
    m = tensor_metrics(npu, bench)
    assert m["max_abs"] == pytest.approx(0.004)
    assert m["max_rel"] == pytest.approx(0.002)
    assert m["one_thousandth"] == pytest.approx(0.75)  # 2.004 is 0.2 % off: not < 0.001 relative
    assert m["five_thousandths"] == 1.0
    assert m["euc"] == pytest.approx(0.004)
    assert m["cosine"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("cosine", "max_abs", "reached"),
    [(0.995, 0.5, True), (0.98, 0.0005, True), (0.98, 0.002, False), (0.89, 0.0, False), (1.0, 1.5, False)],
)
def test_the_verdict_rule(cosine: float, max_abs: float, reached: bool) -> None:
    assert accuracy_reached({"cosine": cosine, "max_abs": max_abs}) is reached
    assert accuracy_reached({"cosine": math.nan, "max_abs": 0.0}) is False


def _bad_gelu(x: np.ndarray, out: np.ndarray) -> None:
    """A faulty activation: right for small values, wrong (clamped at 0.25) above."""
    v = x.astype(np.float64)
    out[...] = np.minimum(v / (1 + np.exp(-1.59576912 * (v + 0.044715 * v**3))), 0.25)


def _bad_gelu_work(specs: object) -> Work:
    return Work(vector_ops=1024)


def _bad_gelu_check(specs: object) -> None:
    assert isinstance(specs, list | tuple) and all(isinstance(s, TensorArg) for s in specs)


def test_the_first_divergent_op_is_the_faulty_kernel(device: cannrt.Device, tmp_path: Path) -> None:
    register_kernel(Kernel("bad_gelu", _bad_gelu, _bad_gelu_work, _bad_gelu_check, outputs=(1,)), replace=True)
    with cannrt.dump(tmp_path / "npu"):
        _chain(device, activation="bad_gelu")
    with cannrt.dump(tmp_path / "bench"):  # the same graph with a correct activation
        _chain(device, activation="gelu")
    rows = compare_dirs(tmp_path / "npu", tmp_path / "bench")
    failing = {(r.op.op_name, r.npu.label) for r in rows if not r.reached}
    assert ("act", "output.1") in failing and ("prob", "input.0") in failing
    assert not any(name == "fc1" for name, _ in failing)
    divergent = first_divergent(rows)
    assert divergent is not None and divergent.op_name == "act"


def test_a_float64_reference_isolates_precision_loss_per_op(device: cannrt.Device, tmp_path: Path) -> None:
    x = device.array(np.full((4, 4), 300.0, np.float16))
    y = device.empty((4, 4), np.float16)
    with cannrt.dump(tmp_path / "npu"):
        device.stream().launch("mul", x, x, y, name="square")  # 90000 overflows fp16 (max 65504)
    write_reference_dump(tmp_path / "npu", tmp_path / "bench")
    rows = compare_dirs(tmp_path / "npu", tmp_path / "bench")
    (out,) = [r for r in rows if r.npu.role == "output"]
    assert not out.reached and out.message == "NPU has NaN/Inf"


def test_nan_on_the_npu_side_is_flagged(tmp_path: Path, device: cannrt.Device) -> None:
    x = device.array(np.array([1.0, np.nan], np.float32))
    out = device.empty(2, np.float32)
    with cannrt.dump(tmp_path / "npu"):
        device.stream().launch("relu", x, out, name="r")
    write_reference_dump(tmp_path / "npu", tmp_path / "bench")
    rows = compare_dirs(tmp_path / "npu", tmp_path / "bench")
    assert any(r.message == "NPU has NaN/Inf" and not r.reached for r in rows)


def test_the_compare_command_reports_and_exits_by_verdict(device: cannrt.Device, tmp_path: Path) -> None:
    with cannrt.dump(tmp_path / "npu"):
        _chain(device)
    runner = CliRunner()
    ok = runner.invoke(app, ["compare", str(tmp_path / "npu"), "--out", str(tmp_path / "result.csv")])
    assert ok.exit_code == 0, ok.output
    assert "no op diverges" in ok.output
    header = (tmp_path / "result.csv").read_text().splitlines()[0]
    assert header.startswith("NPU Name,Bench Name,NPU Dtype") and header.endswith("Accuracy Reached or Not,Err_message")
    missing = runner.invoke(app, ["compare", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
