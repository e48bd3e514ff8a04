"""The .om file: cannrt's own versioned container with the sections of a real CANN offline model.

A real .om starts with a 256-byte header (magic "IMOD") and a partition table whose entries are
MODEL_DEF 0, WEIGHTS_DATA 1, TASK_INFO 2, TBE_KERNELS 3. cannrt keeps that shape with its own magic
and contents (docs/model.md "The .om file" has the byte layout):

    header (256 bytes, little-endian)
        0  magic            8s   b"CANNRTOM"
        8  version major    u16  FORMAT_VERSION[0]: a reader refuses a newer major or minor
       10  version minor    u16
       12  header size      u32  256
       16  partition count  u32
       20  header crc32     u32  of the 256 bytes with this field zero
       24  file size        u64  the whole file, so a truncated one is told from a short section
       32  reserved         224 bytes of zero
    partition table: count x 24 bytes {type u32, crc32 u32, offset u64, size u64}
    partitions, in type order, each starting on an 8-byte boundary

    MODEL_DEF (0)     UTF-8 JSON: name, soc_version, inputs, outputs, streams, events, graph, gears
                      (shapes, memory plan, work size; not their tasks)
    WEIGHTS_DATA (1)  the weight section's bytes as they are loaded into the weight block
    TASK_INFO (2)     UTF-8 JSON: per gear, its task list in submission order
    TBE_KERNELS (3)   UTF-8 JSON: the kernel names the kernel tasks use (tasks hold an index)

Every malformed file raises OmFormatError (a ValueError) naming what is wrong: too short, a foreign
magic (a real CANN .om is named as such), a newer version, a checksum or bounds mismatch, contents
that do not decode or do not fit the model's sections.
"""

from __future__ import annotations

import enum
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from cannrt.om import codec
from cannrt.om.model import Gear, KernelTask, OfflineModel

MAGIC = b"CANNRTOM"
CANN_OM_MAGIC = struct.pack("<I", 0x444F4D49)  # b"IMOD": a real CANN offline model
FORMAT_VERSION = (1, 0)
HEADER_SIZE = 256
_HEADER = struct.Struct("<8sHHIIIQ")
_ENTRY = struct.Struct("<IIQQ")
_ALIGN = 8


class Partition(enum.IntEnum):
    """The partition types of a real .om that cannrt's format keeps."""

    MODEL_DEF = 0
    WEIGHTS_DATA = 1
    TASK_INFO = 2
    TBE_KERNELS = 3


class OmFormatError(ValueError):
    """A file that is not a readable cannrt offline model: truncated, foreign, newer or corrupt."""


def dumps(model: OfflineModel) -> bytes:
    """The .om bytes of a model (what `cannrt atc` writes)."""
    try:
        codec.check_model(model)
    except (ValueError, KeyError) as exc:
        raise OmFormatError(f"cannot write the model: {exc}") from None
    kernels = sorted({t.kernel for g in model.gears for t in g.tasks if isinstance(t, KernelTask)})
    index = {name: i for i, name in enumerate(kernels)}
    model_def = {
        "name": model.name,
        "soc_version": model.soc_version,
        "inputs": [codec.encode_io(io) for io in model.inputs],
        "outputs": [codec.encode_io(io) for io in model.outputs],
        "num_streams": model.num_streams,
        "num_events": model.num_events,
        "graph": model.graph,
        "gears": [codec.encode_gear(g) for g in model.gears],
    }
    task_info = [[codec.encode_task(t, index) for t in g.tasks] for g in model.gears]
    try:
        defs, tasks, names = _json(model_def), _json(task_info), _json(kernels)
    except (ValueError, TypeError) as exc:
        raise OmFormatError(f"cannot write the model: its graph is not JSON ({exc})") from None
    parts = {
        Partition.MODEL_DEF: defs,
        Partition.WEIGHTS_DATA: bytes(model.weights),
        Partition.TASK_INFO: tasks,
        Partition.TBE_KERNELS: names,
    }
    table_end = HEADER_SIZE + _ENTRY.size * len(parts)
    entries, body, offset = [], bytearray(), _align(table_end)
    for kind, data in parts.items():
        entries.append(_ENTRY.pack(int(kind), zlib.crc32(data), offset, len(data)))
        body += data + bytes(_align(len(data)) - len(data))
        offset += _align(len(data))
    file_size = _align(table_end) + len(body)
    header = bytearray(HEADER_SIZE)
    _HEADER.pack_into(header, 0, MAGIC, *FORMAT_VERSION, HEADER_SIZE, len(parts), 0, file_size)
    struct.pack_into("<I", header, 20, zlib.crc32(header))
    table = b"".join(entries)
    return bytes(header) + table + bytes(_align(table_end) - table_end) + bytes(body)


def loads(data: bytes) -> OfflineModel:
    """The model in .om bytes (aclmdlLoadFromMem's parse); OmFormatError for anything malformed."""
    data = bytes(data)
    parts = _partitions(data)
    try:
        model_def = _decode_json(parts[Partition.MODEL_DEF], "MODEL_DEF")
        task_info = _decode_json(parts[Partition.TASK_INFO], "TASK_INFO")
        kernels = _decode_json(parts[Partition.TBE_KERNELS], "TBE_KERNELS")
        if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
            raise ValueError("TBE_KERNELS is not a list of kernel names")
        if not isinstance(task_info, list) or len(task_info) != len(model_def["gears"]):
            raise ValueError("TASK_INFO does not hold one task list per gear")
        gears: list[Gear] = []
        for g, (gear, tasks) in enumerate(zip(model_def["gears"], task_info, strict=True)):
            decoded = tuple(codec.decode_task(t, kernels) for t in codec.as_list(tasks, f"gear {g} tasks"))
            gears.append(codec.decode_gear(gear, decoded))
        graph = model_def["graph"]
        if not isinstance(graph, dict):
            raise ValueError("the graph is not an object")
        model = OfflineModel(
            name=codec.as_str(model_def["name"], "model name"),
            soc_version=codec.as_str(model_def["soc_version"], "soc_version"),
            inputs=tuple(codec.decode_io(io) for io in codec.as_list(model_def["inputs"], "inputs")),
            outputs=tuple(codec.decode_io(io) for io in codec.as_list(model_def["outputs"], "outputs")),
            weights=parts[Partition.WEIGHTS_DATA],
            num_streams=codec.as_int(model_def["num_streams"], "num_streams", 1),
            num_events=codec.as_int(model_def["num_events"], "num_events"),
            gears=tuple(gears),
            graph=graph,
        )
        codec.check_model(model)
    except OmFormatError:
        raise
    except KeyError as exc:
        raise OmFormatError(f"malformed offline model: missing field {exc}") from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise OmFormatError(f"malformed offline model: {exc}") from None
    return model


def save(model: OfflineModel, path: str | os.PathLike[str]) -> None:
    """Write NAME.om (written to a temporary name first, so a failed write leaves no half file)."""
    target = Path(path)
    data = dumps(model)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)


def load(path: str | os.PathLike[str]) -> OfflineModel:
    """Read an .om file (aclmdlLoadFromFile's parse); OSError if unreadable, OmFormatError if malformed."""
    return loads(Path(path).read_bytes())


def _partitions(data: bytes) -> dict[Partition, bytes]:
    if data[:4] == CANN_OM_MAGIC:
        raise OmFormatError("a CANN offline model (magic IMOD), not a cannrt one: compile it with `cannrt atc`")
    if len(data) < HEADER_SIZE:
        if MAGIC.startswith(data[:8]) and data:
            raise OmFormatError(f"truncated offline model: {len(data)} bytes, the header alone is {HEADER_SIZE}")
        raise OmFormatError(f"not a cannrt offline model: {len(data)} bytes, no {MAGIC.decode()} header")
    magic, major, minor, header_size, count, crc, file_size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise OmFormatError(f"not a cannrt offline model: magic {magic!r}, expected {MAGIC!r}")
    if (major, minor) > FORMAT_VERSION:
        mine = ".".join(map(str, FORMAT_VERSION))
        raise OmFormatError(f"offline model format {major}.{minor} is newer than this reader's {mine}")
    header = bytearray(data[:HEADER_SIZE])
    struct.pack_into("<I", header, 20, 0)
    if header_size != HEADER_SIZE or zlib.crc32(header) != crc:
        raise OmFormatError("corrupt offline model: header checksum mismatch")
    if len(data) < file_size:
        raise OmFormatError(f"truncated offline model: {len(data)} of {file_size} bytes")
    if len(data) > file_size:
        raise OmFormatError(f"corrupt offline model: {len(data) - file_size} bytes past its end")
    if count != len(Partition):
        raise OmFormatError(f"corrupt offline model: {count} partitions, expected {len(Partition)}")
    parts: dict[Partition, bytes] = {}
    for i in range(count):
        kind, part_crc, offset, size = _ENTRY.unpack_from(data, HEADER_SIZE + i * _ENTRY.size)
        if kind not in Partition._value2member_map_ or Partition(kind) in parts:
            raise OmFormatError(f"corrupt offline model: partition {i} has type {kind}")
        if offset < HEADER_SIZE + count * _ENTRY.size or offset + size > file_size:
            raise OmFormatError(f"corrupt offline model: partition {Partition(kind).name} at {offset}+{size}")
        part = data[offset : offset + size]
        if zlib.crc32(part) != part_crc:
            raise OmFormatError(f"corrupt offline model: {Partition(kind).name} checksum mismatch")
        parts[Partition(kind)] = part
    return parts


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def _decode_json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OmFormatError(f"corrupt offline model: {what} does not decode ({exc})") from None


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
