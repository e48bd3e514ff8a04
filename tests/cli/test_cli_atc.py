"""`cannrt atc`: atc's command lines write .om files, single-operator folders and JSON dumps; bad input
gets one line and exit status 1, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import typer
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from cannrt.cli.atc import register
from cannrt.om import format as om_format

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps `atc` a named subcommand
        """Unused."""

    return app


def _model(path: Path, op: str = "Relu", batch: int | str = 1) -> Path:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 1, 1)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="Conv_0"),
        helper.make_node(op, ["c"], ["y"], name="Act_1"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])
    model = helper.make_model(
        helper.make_graph(nodes, "tiny", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 13)]
    )
    onnx.save(model, path)
    return path


def _atc(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(_app(), ["atc", *args])


BASE = ("--framework=5", "--soc_version=Ascend910B1")


def test_compile_writes_name_om(tmp_path):
    source = _model(tmp_path / "tiny.onnx")
    result = _atc(f"--model={source}", f"--output={tmp_path / 'tiny'}", *BASE)
    assert result.exit_code == 0, result.output
    assert "ATC run success" in result.output
    model = om_format.load(tmp_path / "tiny.om")
    assert model.name == "tiny" and model.outputs[0].dtype == 1  # force_fp16 by default: an fp16 output
    assert model.graph["precision_mode"] == "force_fp16"


def test_options_reach_the_compiler(tmp_path):
    source = _model(tmp_path / "dyn.onnx", batch="N")
    args = [
        f"--model={source}",
        f"--output={tmp_path / 'dyn'}",
        *BASE,
        "--input_shape=x:-1,3,8,8",
        "--dynamic_batch_size=1,2,8",
        "--precision_mode=force_fp32",
        "--output_type=FP32",
        "--input_format=NCHW",
        "--log=info",
    ]
    result = _atc(*args)
    assert result.exit_code == 0, result.output
    model = om_format.load(tmp_path / "dyn.om")
    assert [g.batch for g in model.gears] == [1, 2, 8]
    assert model.inputs[-1].name == "ascend_mbatch_shape_data" and model.inputs[0].shape == (-1, 3, 8, 8)
    assert model.outputs[0].dtype == 0 and model.inputs[0].format == 0


def test_out_nodes_select_the_outputs(tmp_path):
    source = _model(tmp_path / "tiny.onnx")
    result = _atc(f"--model={source}", f"--output={tmp_path / 'cut'}", *BASE, "--out_nodes=Conv_0:0")
    assert result.exit_code == 0, result.output
    model = om_format.load(tmp_path / "cut.om")
    assert [o.name for o in model.outputs] == ["c"] and [t.op_type for t in model.gears[0].tasks] == ["Cast", "Conv"]


ADD_OP = [
    {
        "op": "Add",
        "input_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}] * 2,
        "output_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}],
    },
    {
        "op": "Cast",
        "input_desc": [{"format": "ND", "shape": [4], "type": "float32"}],
        "output_desc": [{"format": "ND", "shape": [4], "type": "float16"}],
        "attr": [{"name": "dst_type", "type": "int", "value": 1}],
    },
    {
        "op": "Relu",
        "name": "my_relu",
        "input_desc": [{"format": "NCHW", "shape": [1, 2, 3, 3], "type": "float16"}],
        "output_desc": [{"format": "NCHW", "shape": [1, 2, 3, 3], "type": "float16"}],
    },
]


def test_singleop_writes_one_model_per_entry_with_atc_names(tmp_path):
    ops = tmp_path / "add_op.json"
    ops.write_text(json.dumps(ADD_OP))
    result = _atc(f"--singleop={ops}", f"--output={tmp_path / 'op_models'}", "--soc_version=Ascend910B1")
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / "op_models").iterdir())
    assert names == ["0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om", "1_Cast_0_2_4_1_2_4.om", "my_relu.om"]
    add = om_format.load(tmp_path / "op_models" / names[0])
    assert add.graph["singleop"]["op"] == "Add" and add.inputs[0].dtype == 3
    assert [t.op_type for t in add.gears[0].tasks] == ["Add"]


def test_mode_1_dumps_a_model_as_json(tmp_path):
    source = _model(tmp_path / "tiny.onnx")
    assert _atc(f"--model={source}", f"--output={tmp_path / 'tiny'}", *BASE).exit_code == 0
    result = _atc("--mode=1", f"--om={tmp_path / 'tiny.om'}", f"--json={tmp_path / 'tiny.json'}")
    assert result.exit_code == 0, result.output
    dumped = json.loads((tmp_path / "tiny.json").read_text())
    assert dumped["inputs"][0]["name"] == "x" and dumped["gears"][0]["tasks"][0]["kind"] == "KernelTask"
    assert [n["op_type"] for n in dumped["graph"]["nodes"]][-1] == "Conv"  # Relu fused into it


def _fails(result, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    for word in words:
        assert word in lines[0], lines[0]


def test_errors_are_one_line(tmp_path):
    source = _model(tmp_path / "tiny.onnx")
    out = f"--output={tmp_path / 'x'}"
    (tmp_path / "notes.txt").write_text("hello, this is not a model\n")
    _fails(_atc(f"--model={tmp_path / 'notes.txt'}", out, *BASE), "not an ONNX model")
    _fails(_atc(f"--model={tmp_path / 'missing.onnx'}", out, *BASE), "cannot read")
    _fails(_atc(f"--model={_model(tmp_path / 'det.onnx', op='Det')}", out, *BASE), "Act_1", "Det")
    _fails(_atc(f"--model={source}", out, *BASE, "--input_shape=x:1,3,eight,8"), "--input_shape")
    _fails(_atc(f"--model={source}", out, *BASE, "--input_shape=y:1,3,8,8"), "not an input")
    _fails(_atc(f"--model={source}", out, "--framework=3", "--soc_version=Ascend910B1"), "TensorFlow")
    _fails(_atc(f"--model={source}", out, "--framework=5"), "--soc_version")
    _fails(_atc(f"--model={source}", out, *BASE, "--precision_mode=fp8"), "precision_mode")
    _fails(_atc(f"--model={source}", out, *BASE, "--out_nodes=Nope:0"), "Nope")
    _fails(_atc(f"--model={source}", out, *BASE, "--dynamic_batch_size=1,x"), "--dynamic_batch_size")


@pytest.mark.parametrize("damage", ["truncate", "foreign"])
def test_mode_1_on_a_bad_om(tmp_path, damage):
    source = _model(tmp_path / "tiny.onnx")
    assert _atc(f"--model={source}", f"--output={tmp_path / 'tiny'}", *BASE).exit_code == 0
    data = (tmp_path / "tiny.om").read_bytes()
    (tmp_path / "bad.om").write_bytes(data[: len(data) // 2] if damage == "truncate" else b"IMOD" + data[4:])
    result = _atc("--mode=1", f"--om={tmp_path / 'bad.om'}", f"--json={tmp_path / 'bad.json'}")
    _fails(result, "truncated" if damage == "truncate" else "CANN offline model")


def test_singleop_errors(tmp_path):
    bad = tmp_path / "ops.json"
    bad.write_text(json.dumps([{"op": "Add", "input_desc": [{"format": "ND", "shape": [2], "type": "complex64"}]}]))
    _fails(_atc(f"--singleop={bad}", f"--output={tmp_path / 'd'}"), "entry 0", "complex64")
    bad.write_text("[not json")
    _fails(_atc(f"--singleop={bad}", f"--output={tmp_path / 'd'}"), "not JSON")
    bad.write_text(json.dumps([{"op": "NoSuchOp", "input_desc": [], "output_desc": []}]))
    _fails(_atc(f"--singleop={bad}", f"--output={tmp_path / 'd'}"), "NoSuchOp")
