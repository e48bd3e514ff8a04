"""Float8, float4, int4 / uint4 and int2 / uint2 tensors through every layer: ONNX import (packed
initialisers), the Cast kernel, the .om file, host <-> device copies, acl.mdl's descriptions and
aclDataTypeSize (docs/dtypes.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cannrt
from cannrt.dtypes import ACL_TO_NUMPY, GE_INTERNAL_BASE, acl_code, acl_type_size, reported_acl_type
from cannrt.graph import CompileOptions, compile_model
from cannrt.om import format as om_format

OPTIONS = CompileOptions(precision_mode="must_keep_origin_dtype")


def _model(nodes: list[onnx.NodeProto], inputs: list, outputs: list, inits: list | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "narrow", inputs, outputs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])


def _int4_weight_model() -> tuple[onnx.ModelProto, np.ndarray]:
    """Outputs y = x + Cast<float>(w) and w itself, w an INT4 initialiser (packed two per byte in
    the ONNX file): the Cast folds, w stays a weight the model copies out."""
    w = np.array([[-8, -3, 0, 1, 7], [2, -1, 5, -6, 3]], dtype=ml_dtypes.int4)
    init = numpy_helper.from_array(w, "w")
    assert init.data_type == TensorProto.INT4 and len(init.raw_data) == 5  # 10 elements, packed
    nodes = [
        helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "wf"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])
    w_out = helper.make_tensor_value_info("w", TensorProto.INT4, [2, 5])
    return _model(nodes, [x], [y, w_out], [init]), w


def test_a_packed_int4_initialiser_is_one_byte_per_element_in_the_om_file(rt, tmp_path: Path) -> None:
    model, w = _int4_weight_model()
    offline = compile_model(model, OPTIONS)
    assert w.view(np.uint8).tobytes() in offline.weights  # unpacked: the 10 bytes of ml_dtypes' int4
    assert [io.size for io in offline.outputs] == [40, 10]
    path = tmp_path / "int4.om"
    om_format.save(offline, path)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    with cannrt.Model.load(path) as loaded:
        y, w_back = loaded(x)
    np.testing.assert_array_equal(y, x + w.astype(np.float32))
    assert w_back.dtype == w.dtype
    np.testing.assert_array_equal(w_back.view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize(
    ("onnx_type", "numpy_type", "reported"),
    [
        (TensorProto.INT4, ml_dtypes.int4, 29),
        (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, 36),
        (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, 40),
        (TensorProto.UINT4, ml_dtypes.uint4, -1),  # no aclDataType: the graph engine's own code
        (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, -1),
        (TensorProto.INT2, ml_dtypes.int2, -1),  # ge DT_INT2 (31), which aclDataType lacks
    ],
)
def test_narrow_inputs_copy_one_element_per_byte(rt, onnx_type: int, numpy_type: type, reported: int) -> None:
    """A model taking and returning a narrow type: the dataset buffer is one byte per element, the
    values come back unchanged, acl reports the type's aclDataType or ACL_DT_UNDEFINED."""
    x = helper.make_tensor_value_info("x", onnx_type, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    z = helper.make_tensor_value_info("z", onnx_type, [3, 4])
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT), helper.make_node("Identity", ["x"], ["z"])]
    offline = compile_model(_model(nodes, [x], [y, z]), OPTIONS)
    (io,) = offline.inputs
    assert io.size == 12 and reported_acl_type(io.dtype) == reported
    values = np.array([0, 1, 2, 3] * 3, dtype=np.float32).reshape(3, 4).astype(numpy_type)
    with cannrt.Model(offline) as model:
        got, same = model(values)
    np.testing.assert_array_equal(got, values.astype(np.float32))
    assert same.dtype == np.dtype(numpy_type)
    np.testing.assert_array_equal(same.view(np.uint8), values.view(np.uint8))


def test_acl_mdl_reports_undefined_for_types_acl_has_no_code_for(acl: ModuleType, tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.UINT4, [8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [8])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)
    path = tmp_path / "uint4.om"
    om_format.save(compile_model(_model([node], [x], [y]), OPTIONS), path)
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.get_input_data_type(desc, 0) == acl.constants.ACL_DT_UNDEFINED
    assert acl.mdl.get_output_data_type(desc, 0) == acl.constants.ACL_FLOAT8_E4M3FN
    assert acl.mdl.get_input_size_by_index(desc, 0) == 8
    assert acl.mdl.destroy_desc(desc) == 0
    assert acl.mdl.unload(model_id) == 0


def test_acl_data_type_size() -> None:
    import cannrt.acl as facade

    c = facade.constants
    sizes = {c.ACL_INT4: 1, c.ACL_FLOAT8_E5M2: 1, c.ACL_FLOAT8_E4M3FN: 1, c.ACL_FLOAT8_E8M0: 1, c.ACL_FLOAT4_E2M1: 1}
    sizes |= {c.ACL_STRING: 0, c.ACL_BF16: 2, c.ACL_FLOAT: 4, 31: 0, GE_INTERNAL_BASE + 21: 0}
    assert {code: facade.get_data_type_size(code) for code in sizes} == sizes
    assert all(0 <= code < 256 for code in ACL_TO_NUMPY)  # a kernel parameter block holds a dtype in a byte
    assert acl_code(ml_dtypes.int2) == 31 and acl_code(ml_dtypes.uint2) == 32
    assert acl_type_size(-1) == 0


def _reference_cast(x: np.ndarray, to: int, **attrs: object) -> np.ndarray:
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    xi = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
    yi = helper.make_tensor_value_info("y", to, list(x.shape))
    (want,) = ReferenceEvaluator(_model([node], [xi], [yi])).run(None, {"x": x})
    return np.asarray(want)


def _cannrt_cast(x: np.ndarray, to: int, **attrs: object) -> np.ndarray:
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    xi = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
    yi = helper.make_tensor_value_info("y", to, list(x.shape))
    with cannrt.Model(compile_model(_model([node], [xi], [yi]), OPTIONS)) as model:
        (got,) = model(x)
    return np.asarray(got)


EDGES = np.array([0.0, -0.0, 1e-9, 0.3, 1.5, 2.5, 3.5, 240.0, 447.0, 449.0, 500.0, 6e4, 1e6, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E4M3FNUZ])
@pytest.mark.parametrize("saturate", [0, 1])
def test_float8_cast_saturates_and_rounds_to_nearest_even(rt, to: int, saturate: int) -> None:
    x = np.concatenate([EDGES, -EDGES]).astype(np.float32)
    got = _cannrt_cast(x, to, saturate=saturate)
    want = _reference_cast(x, to, saturate=saturate)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bit for bit, NaNs included
    finite = np.isfinite(x) & (np.abs(x) > 1e5)
    assert np.isfinite(got[finite].astype(np.float32)).all() == bool(saturate)


@pytest.mark.parametrize("mode", ["up", "nearest", "down"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_e8m0_cast_follows_the_round_mode(rt, mode: str, saturate: int) -> None:
    x = np.array([0.0, 1.0, 1.5, 1.25, 3.0, 0.75, 2.0**-127, 3e38, 2.0**127 * 1.5, np.inf, np.nan, -4.0], np.float32)
    got = _cannrt_cast(x, TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=mode)
    want = numpy_helper.to_float8e8m0(x, bool(saturate), mode)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_an_unknown_round_mode_is_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [2])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode="sideways")
    model = _model([node], [x], [y])
    with pytest.raises(cannrt.graph.GraphError, match="round_mode 'sideways'"):
        compile_model(model, OPTIONS)


def test_cannrt_run_prints_narrow_outputs_and_refuses_a_compare_onnxruntime_cannot_make(rt, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cannrt.cli.app import app

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FNUZ, [2, 3])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FNUZ)
    path = tmp_path / "fnuz.onnx"
    onnx.save(_model([node], [x], [y]), path)
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 0 and "output y: shape (2, 3) float8_e4m3fnuz" in result.output
    result = CliRunner().invoke(app, ["run", str(path), "--compare", "onnxruntime"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "--compare onnxruntime" in result.output


def test_dumps_of_narrow_tensors_read_back_bit_for_bit(rt, tmp_path: Path) -> None:
    from cannrt.tools.dump import load_dump

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [
        helper.make_tensor_value_info(n, t, [2, 3]) for n, t in (("y", TensorProto.FLOAT8E5M2), ("z", TensorProto.INT4))
    ]
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E5M2)]
    nodes.append(helper.make_node("Cast", ["x"], ["z"], to=TensorProto.INT4))
    data = np.array([[1, 2, -3], [500, -7, 0.3]], np.float32)
    with (
        cannrt.Model(compile_model(_model(nodes, [x], outs), OPTIONS)) as model,
        cannrt.dump(tmp_path, mode="output") as res,
    ):
        y, z = model(data)
    dumped = {op.op_name: op.tensors[0].array for op in map(load_dump, res.files)}
    assert sorted(dumped) == ["Cast_0", "Cast_1"]
    for got, want in ((dumped["Cast_0"], y), (dumped["Cast_1"], z)):
        assert got is not None and got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("code", [5, 99, 255])
def test_an_om_with_an_unknown_io_type_code_is_refused(code: int) -> None:
    model, _ = _int4_weight_model()
    offline = compile_model(model, OPTIONS)
    bad = dataclasses.replace(offline, inputs=(dataclasses.replace(offline.inputs[0], dtype=code),))
    with pytest.raises(om_format.OmFormatError, match=f"unknown tensor type code {code}"):
        om_format.loads(om_format.dumps(bad))


@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E8M0])
def test_a_folded_cast_and_the_builtin_cast_kernel_follow_onnx_cast_too(rt, to: int) -> None:
    from cannrt.graph import folding

    x = np.concatenate([EDGES, -EDGES]).astype(np.float32)
    want = _reference_cast(x, to).view(np.uint8)  # ONNX's defaults: saturate 1, round_mode "up"
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    folded = folding.evaluate(node, {"to": to}, [x], 25)
    assert folded is not None
    np.testing.assert_array_equal(folded[0].view(np.uint8), want)
    device = cannrt.Device(0)
    source, target = device.array(x), device.empty(x.shape, _reference_cast(x, to).dtype)
    stream = device.stream()
    stream.launch("cast", source, target)
    stream.synchronize()
    np.testing.assert_array_equal(target.to_numpy().view(np.uint8), want)
