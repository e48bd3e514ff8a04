"""atc --singleop (graph/singleop.py) and acl.op.set_model_dir (acl/_op_models.py) read one table of
type and format names, cannrt.dtypes: what the writer accepts and records, the reader takes back."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from cannrt.acl import _op_models
from cannrt.dtypes import CANONICAL_TYPE_NAMES, FORMAT_CODES, PLAIN_FORMATS, TYPE_NAMES
from cannrt.graph import GraphError, singleop
from cannrt.om import format as om_format

SHAPE = [1, 2, 3, 2, 2]  # N, C, D, H, W


@pytest.mark.parametrize("name", sorted(TYPE_NAMES))
def test_every_type_name_the_writer_records_reads_back_as_its_code(name: str) -> None:
    recorded = singleop._type_name(singleop.TYPES[name])
    assert recorded == CANONICAL_TYPE_NAMES[TYPE_NAMES[name]]
    for fmt, code in PLAIN_FORMATS.items():
        pattern = _op_models._pattern({"type": recorded, "format": fmt, "shape": SHAPE}, "t")
        assert (pattern.dtype, pattern.format) == (TYPE_NAMES[name], code)


def _entry(fmt: str, kind: str = "float16") -> dict[str, object]:
    desc = {"format": fmt, "shape": SHAPE, "type": kind}
    return {"op": "Add", "input_desc": [desc, desc], "output_desc": [desc]}


def test_an_ncdhw_model_from_atc_runs_through_execute_v2(acl: ModuleType, tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps([_entry("NCDHW")]))
    out = tmp_path / "models"
    out.mkdir()
    for name, model in singleop.compile_ops(ops, "Ascend910B1"):
        assert name == "0_Add" + "_1_30_1_2_3_2_2" * 3 + ".om"
        om_format.save(model, out / name)
    assert acl.op.set_model_dir(str(out)) == 0
    ncdhw = acl.constants.ACL_FORMAT_NCDHW
    assert ncdhw == FORMAT_CODES["NCDHW"] == 30
    descs = [acl.create_tensor_desc(acl.constants.ACL_FLOAT16, SHAPE, ncdhw) for _ in range(3)]
    assert all(descs)
    a = np.arange(24, dtype=np.float16).reshape(SHAPE)
    ptrs = []
    for host in (a, a, np.zeros_like(a)):
        ptr, ret = acl.rt.malloc(host.nbytes, 0)
        assert ret == 0 and acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, 1) == 0
        ptrs.append(ptr)
    buffers = [acl.create_data_buffer(p, a.nbytes) for p in ptrs]
    stream, _ = acl.rt.create_stream()
    assert acl.op.execute_v2("Add", descs[:2], buffers[:2], descs[2:], buffers[2:], 0, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    got = np.zeros_like(a)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(got), got.nbytes, ptrs[2], got.nbytes, 2) == 0
    np.testing.assert_array_equal(got, a + a)
    nd = [acl.create_tensor_desc(acl.constants.ACL_FLOAT16, SHAPE, acl.constants.ACL_FORMAT_ND) for _ in range(3)]
    ret = acl.op.execute_v2("Add", nd[:2], buffers[:2], nd[2:], buffers[2:], 0, stream)
    assert ret == acl.ACL_ERROR_OP_NOT_FOUND  # the model dir holds the NCDHW Add only


def test_tiled_formats_and_unknown_names_are_refused(tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps([_entry("NC1HWC0")]))
    with pytest.raises(GraphError, match=r"format 'NC1HWC0'.*no format conversion"):
        singleop.compile_ops(ops, "Ascend910B1")
    ops.write_text(json.dumps([_entry("ND", "complex64")]))
    with pytest.raises(GraphError, match="type 'complex64'"):
        singleop.compile_ops(ops, "Ascend910B1")
    cast = {**_entry("ND"), "op": "Cast", "attr": [{"name": "dst_type", "type": "data_type", "value": "qint8"}]}
    cast["input_desc"] = cast["input_desc"][:1]  # type: ignore[index]
    ops.write_text(json.dumps([cast]))
    with pytest.raises(GraphError, match="data_type 'qint8'"):
        singleop.compile_ops(ops, "Ascend910B1")
