"""The .om container: a round trip keeps every field; truncated, foreign, newer and corrupt files raise."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import zlib

import pytest

from cannrt.om import (
    EventRecordTask,
    EventWaitTask,
    Gear,
    IoDesc,
    KernelTask,
    MemcpyTask,
    OfflineModel,
    PlannedTensor,
    Section,
    TensorRef,
)
from cannrt.om import format as om_format
from cannrt.om.format import HEADER_SIZE, OmFormatError, Partition


def _gear(batch: int) -> Gear:
    x = TensorRef(Section.INPUT, 0, 0, (batch, 4))
    w = TensorRef(Section.WEIGHT, 512, 0, (4, 4))
    h = TensorRef(Section.WORK, 0, 0, (batch, 4))
    y = TensorRef(Section.OUTPUT, 0, 1, (batch, 4), index=0)
    tasks = (
        KernelTask(0, "matmul", 2, (x, w, h, 4, 1.5, float("nan"), float("-inf")), "MatMul_0", "MatMul"),
        EventRecordTask(0, 0),
        EventWaitTask(1, 0),
        KernelTask(1, "cast_f32_f16", 1, (h, y, -3), "Cast_1", "Cast"),
        MemcpyTask(1, w, TensorRef(Section.WORK, 512, 0, (4, 4)), 64, node="Identity_2"),
    )
    plan = (PlannedTensor("h", 0, 16 * batch, 0, 3, 0), PlannedTensor("w_copy", 512, 64, 4, 4, 1))
    return Gear(batch, ((batch, 4),), ((batch, 4),), tasks, plan, 1024, 512 + batch, 900, 500)


def _model() -> OfflineModel:
    return OfflineModel(
        name="tiny",
        soc_version="Ascend910B1",
        inputs=(IoDesc("x", 0, 0, (-1, 4), 64), IoDesc("ascend_mbatch_shape_data", 9, 2, (1,), 8)),
        outputs=(IoDesc("y", 1, 2, (-1, 4), 32),),
        weights=bytes(range(256)) * 4,
        num_streams=2,
        num_events=1,
        gears=(
            dataclasses.replace(_gear(1), input_shapes=((1, 4), (1,))),
            dataclasses.replace(_gear(4), input_shapes=((4, 4), (1,))),
        ),
        graph={"nodes": [{"name": "MatMul_0", "op_type": "MatMul"}], "opset": 13},
    )


def _same(a: object, b: object) -> bool:
    """Equality that takes nan == nan (a task argument may be nan)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(_same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return type(a) is type(b) and a == b


def test_round_trip_keeps_every_field(tmp_path):
    model = _model()
    path = tmp_path / "tiny.om"
    om_format.save(model, path)
    back = om_format.load(path)
    assert _same(back, model)
    assert back.work_size == 1024 and back.weight_size == 1024
    # ints stay ints and floats stay floats: the kernel's parameter block packs them differently
    args = back.gears[0].tasks[0].args
    assert type(args[3]) is int and type(args[4]) is float and math.isnan(args[5]) and args[6] == -math.inf
    assert om_format.dumps(back) == path.read_bytes()


def test_layout_has_the_header_and_four_partitions():
    data = om_format.dumps(_model())
    magic, major, minor, header_size, count = struct.unpack_from("<8sHHII", data)
    assert (magic, (major, minor), header_size, count) == (b"CANNRTOM", om_format.FORMAT_VERSION, 256, 4)
    assert struct.unpack_from("<Q", data, 24)[0] == len(data)
    kinds = [struct.unpack_from("<IIQQ", data, HEADER_SIZE + 24 * i) for i in range(4)]
    assert [k[0] for k in kinds] == [p.value for p in Partition]
    weights = kinds[Partition.WEIGHTS_DATA]
    assert data[weights[2] : weights[2] + weights[3]] == _model().weights
    assert all(k[2] % 8 == 0 for k in kinds)
    kernels = kinds[Partition.TBE_KERNELS]
    assert json.loads(data[kernels[2] : kernels[2] + kernels[3]]) == ["cast_f32_f16", "matmul"]


@pytest.mark.parametrize("cut", [0, 5, 100, HEADER_SIZE, HEADER_SIZE + 50, -1])
def test_truncated_file_raises(cut):
    data = om_format.dumps(_model())
    with pytest.raises(OmFormatError, match=r"truncated|not a cannrt"):
        om_format.loads(data[:cut] if cut >= 0 else data[:-1])


def test_foreign_and_cann_files_raise():
    with pytest.raises(OmFormatError, match="not a cannrt offline model"):
        om_format.loads(b"\x08\x07ONNX protobuf bytes" * 30)
    real_om = struct.pack("<I", 0x444F4D49) + bytes(252)
    with pytest.raises(OmFormatError, match="CANN offline model"):
        om_format.loads(real_om)
    with pytest.raises(OmFormatError):
        om_format.loads(b"")


def _with_header(data: bytes, **fields: int) -> bytes:
    header = bytearray(data[:HEADER_SIZE])
    for offset, value in fields.items():
        fmt, at = {"major": ("<H", 8), "minor": ("<H", 10), "count": ("<I", 16)}[offset]
        struct.pack_into(fmt, header, at, value)
    struct.pack_into("<I", header, 20, 0)
    struct.pack_into("<I", header, 20, zlib.crc32(header))
    return bytes(header) + data[HEADER_SIZE:]


def test_newer_version_raises_and_older_minor_is_read():
    data = om_format.dumps(_model())
    major, minor = om_format.FORMAT_VERSION
    with pytest.raises(OmFormatError, match="newer"):
        om_format.loads(_with_header(data, minor=minor + 1))
    with pytest.raises(OmFormatError, match="newer"):
        om_format.loads(_with_header(data, major=major + 1, minor=0))
    with pytest.raises(OmFormatError, match="partitions"):
        om_format.loads(_with_header(data, count=3))


def test_every_flipped_byte_is_caught():
    data = om_format.dumps(_model())
    for position in range(0, len(data), 7):
        corrupt = bytearray(data)
        corrupt[position] ^= 0x5A
        try:
            back = om_format.loads(bytes(corrupt))
        except OmFormatError:
            continue
        # only padding bytes are unchecked, and then the model is unchanged
        assert _same(back, _model()), position


def _repack(model_def_edit=None, task_edit=None) -> bytes:
    """A file whose checksums match but whose contents were edited (what a crafted file looks like)."""
    data = om_format.dumps(_model())
    parts = om_format._partitions(data)
    model_def = json.loads(parts[Partition.MODEL_DEF])
    tasks = json.loads(parts[Partition.TASK_INFO])
    if model_def_edit:
        model_def_edit(model_def)
    if task_edit:
        task_edit(tasks)
    f = om_format
    edited = {Partition.MODEL_DEF: f._json(model_def), Partition.TASK_INFO: f._json(tasks)}
    table_end = HEADER_SIZE + 24 * 4
    out, entries, offset = bytearray(), [], f._align(table_end)
    for kind in Partition:
        part = edited.get(kind, parts[kind])
        entries.append(struct.pack("<IIQQ", kind, zlib.crc32(part), offset, len(part)))
        out += part + bytes(f._align(len(part)) - len(part))
        offset += f._align(len(part))
    header = bytearray(HEADER_SIZE)
    struct.pack_into("<8sHHIIIQ", header, 0, f.MAGIC, *f.FORMAT_VERSION, 256, 4, 0, offset)
    struct.pack_into("<I", header, 20, zlib.crc32(header))
    return bytes(header) + b"".join(entries) + bytes(f._align(table_end) - table_end) + bytes(out)


def test_repack_helper_round_trips():
    assert _same(om_format.loads(_repack()), _model())


@pytest.mark.parametrize(
    ("edit_def", "edit_tasks", "message"),
    [
        (lambda d: d.pop("num_streams"), None, "missing field"),
        (lambda d: d.update(num_streams=1), None, "stream 1 of 1"),
        (lambda d: d.update(num_events=0), None, "event 0 of 0"),
        (lambda d: d["gears"][0].update(work_size=8), None, "WORK bytes|work 8"),
        (lambda d: d["gears"].pop(), None, "one task list per gear"),
        (lambda d: d["inputs"][0].update(shape="1,4"), None, "list of dims"),
        (None, lambda t: t[0][0].update(kn=7), "kernel index 7"),
        (None, lambda t: t[0][0]["a"][0].update(s=9), "tensor section 9"),
        (None, lambda t: t[0][0]["a"][1].update(o=2048), "WEIGHT bytes"),
        (None, lambda t: t[0][0]["a"].append("x"), "tensor or a number"),
        (None, lambda t: t[0][0].update(k="jump"), "unknown task kind"),
        (None, lambda t: t[0][0].update(bd=0), "block_dim"),
        (None, lambda t: t[0][4].update(nb=65), "memcpy of 65 bytes"),
        (None, lambda t: t[0][3]["a"][1].update(i=3), "output 3 of 1"),
    ],
)
def test_inconsistent_contents_raise(edit_def, edit_tasks, message):
    with pytest.raises(OmFormatError, match=message):
        om_format.loads(_repack(edit_def, edit_tasks))


def test_dumps_refuses_a_model_that_does_not_fit_its_sections():
    bad = Gear(0, ((1, 4),), ((1, 4),), (EventWaitTask(3, 0),), (), 0)
    model = OfflineModel(
        "m", "Ascend910B1", (IoDesc("x", 0, 0, (1, 4), 16),), (IoDesc("y", 0, 0, (1, 4), 16),), b"", 1, 1, (bad,)
    )
    with pytest.raises(OmFormatError, match="stream 3"):
        om_format.dumps(model)
