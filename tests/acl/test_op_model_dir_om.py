"""acl.op.set_model_dir reads the single-operator .om files of `atc --singleop` (and still the JSON)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
from typer.testing import CliRunner

from cannrt.cli.app import app
from cannrt.om import format as om_format
from cannrt.om.model import Gear, IoDesc, KernelTask, OfflineModel, Section, TensorRef

F16, ND = 1, 2
SHAPE = (8, 16)


def add_model(graph: dict[str, object]) -> OfflineModel:
    """A single-operator Add model of fp16 [8, 16] tensors, as atc --singleop writes one."""
    refs = [TensorRef(Section.INPUT, 0, F16, SHAPE, i) for i in range(2)] + [TensorRef(Section.OUTPUT, 0, F16, SHAPE)]
    gear = Gear(0, (SHAPE, SHAPE), (SHAPE,), (KernelTask(0, "add", 1, tuple(refs), "Add", "Add"),), (), 0)
    io = IoDesc("x", F16, ND, SHAPE, 256)
    return OfflineModel("0_Add", "Ascend910B1", (io, io), (io,), b"", 1, 0, (gear,), graph)


def _descs(acl: ModuleType, shape: tuple[int, ...]) -> list[int]:
    return [acl.create_tensor_desc(F16, list(shape), ND) for _ in range(3)]


def _run_add(acl: ModuleType, shape: tuple[int, ...]) -> int:
    size = int(np.prod(shape)) * 2
    buffers = []
    for _ in range(3):
        ptr, _ = acl.rt.malloc(size, 0)
        buffers.append(acl.create_data_buffer(ptr, size))
    descs = _descs(acl, shape)
    stream, _ = acl.rt.create_stream()
    ret = acl.op.execute_v2("Add", descs[:2], buffers[:2], descs[2:], buffers[2:], 0, stream)
    if ret == 0:
        ret = acl.rt.synchronize_stream(stream)
    return int(ret)


def test_om_files_from_atc_singleop_are_the_model_dir(acl: ModuleType, tmp_path: Path) -> None:
    om_format.save(
        add_model({"nodes": [{"op_type": "Add", "attrs": {}}]}), tmp_path / "0_Add_1_2_8_16_1_2_8_16_1_2_8_16.om"
    )
    assert acl.op.set_model_dir(str(tmp_path)) == 0
    assert _run_add(acl, SHAPE) == 0
    assert _run_add(acl, (4, 16)) == acl.ACL_ERROR_OP_NOT_FOUND  # no model compiled for this shape


def test_the_singleop_entry_names_the_cann_op(acl: ModuleType, tmp_path: Path) -> None:
    entry = {"op": "Add", "input_desc": [], "output_desc": [], "attr": []}
    om_format.save(add_model({"singleop": entry, "nodes": [{"op_type": "Add"}]}), tmp_path / "add.om")
    assert acl.op.set_model_dir(str(tmp_path)) == 0
    assert _run_add(acl, SHAPE) == 0


def test_bad_om_files_get_codes(acl: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "broken.om").write_bytes(b"IMOD" + bytes(300))
    assert acl.op.set_model_dir(str(tmp_path)) == acl.ACL_ERROR_DESERIALIZE_MODEL
    other = tmp_path / "two"
    other.mkdir()
    om_format.save(add_model({"nodes": [{"op_type": "Add"}, {"op_type": "Relu"}]}), other / "two.om")
    assert acl.op.set_model_dir(str(other)) == acl.ACL_ERROR_PARSE_FILE


ADD_OP_JSON = """[
  {
    "op": "Add",
    "input_desc": [
      {"format": "ND", "shape": [8, 16], "type": "int32"},
      {"format": "ND", "shape": [8, 16], "type": "int32"}
    ],
    "output_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}]
  }
]
"""


def test_atc_singleop_on_the_add_op_json_layout_makes_a_dir_execute_v2_runs(acl: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "add_op.json").write_text(ADD_OP_JSON)
    out = tmp_path / "op_models"
    result = CliRunner().invoke(app, ["atc", f"--singleop={tmp_path / 'add_op.json'}", f"--output={out}"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.glob("*.om")] == ["0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om"]
    assert acl.op.set_model_dir(str(out)) == 0
    a, b = np.arange(128, dtype=np.int32).reshape(8, 16), np.full((8, 16), 7, np.int32)
    ptrs = []
    for host in (a, b, np.zeros_like(a)):
        ptr, _ = acl.rt.malloc(host.nbytes, 0)
        acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, 1)
        ptrs.append(ptr)
    descs = [acl.create_tensor_desc(3, [8, 16], ND) for _ in range(3)]
    buffers = [acl.create_data_buffer(p, a.nbytes) for p in ptrs]
    stream, _ = acl.rt.create_stream()
    assert acl.op.execute_v2("Add", descs[:2], buffers[:2], descs[2:], buffers[2:], 0, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    got = np.zeros_like(a)
    acl.rt.memcpy(acl.util.numpy_to_ptr(got), got.nbytes, ptrs[2], got.nbytes, 2)
    np.testing.assert_array_equal(got, a + b)
    f16 = [acl.create_tensor_desc(F16, [8, 16], ND) for _ in range(3)]
    ret = acl.op.execute_v2("Add", f16[:2], buffers[:2], f16[2:], buffers[2:], 0, stream)
    assert ret == acl.ACL_ERROR_OP_NOT_FOUND  # only the compiled int32 Add is in the model dir
