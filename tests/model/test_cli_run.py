"""`cannrt run`: runs a model once and reports; bad input is one line and a non-zero exit."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import onnx
from hand_models import K, M, dense_model
from typer.testing import CliRunner

from cannrt.cli.app import app
from cannrt.om import format as om_format

runner = CliRunner()


def test_run_prints_shapes_times_and_memory(rt, tmp_path: Path) -> None:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(), path)
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert "output y0: shape (4, 16) float32" in result.output
    assert "device time (modelled):" in result.output and "wall time:" in result.output
    assert "feature maps: planned 1,024 B" in result.output and "lower bound 512 B" in result.output


def test_run_with_input_files_and_profile(rt, tmp_path: Path) -> None:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(), path)
    x = np.full((M, K), 0.25, np.float32)
    np.save(tmp_path / "x.npy", x)
    result = runner.invoke(app, ["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--profile", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "profile:" in result.output
    (summary,) = tmp_path.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    rows = list(csv.DictReader(summary.open()))
    assert [(r["Op Name"], r["OP Type"]) for r in rows] == [
        ("MatMul_0", "MatMul"),
        ("Relu_2", "Relu"),
        ("Add_1", "Add"),
        ("Relu_3", "Relu"),
    ]


def test_run_bad_input_is_one_line(rt, tmp_path: Path) -> None:
    broken = tmp_path / "broken.om"
    broken.write_bytes(b"\0" * 10)
    for args in (["run", str(broken)], ["run", str(tmp_path / "absent.om")], ["run", str(broken), "--compare", "x"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output


def test_run_compiles_an_onnx_model_and_compares_with_onnxruntime(rt, tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    nodes = [onnx.helper.make_node("Relu", ["x"], ["t"], name="relu"), onnx.helper.make_node("Add", ["t", "x"], ["y"])]
    graph = onnx.helper.make_graph(nodes, "tiny", [x], [y])
    path = tmp_path / "tiny.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)
    result = runner.invoke(app, ["run", str(path), "--compare", "onnxruntime"])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("max |cannrt - onnxruntime| of y")]
    assert float(line.split()[-1]) < 1e-3  # default precision (fp16 matrix ops; none here)


def test_run_names_an_unsupported_op_in_one_line(rt, tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    node = onnx.helper.make_node("Det", ["x"], ["y"], name="the_det")
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])
    path = tmp_path / "det.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y])), path)
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1 and "the_det" in result.output
