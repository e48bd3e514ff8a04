"""Hardware formats: 64-byte SQEs with the CANN header, completion reports and parameter blocks.

Every SQE type the abi package names either round-trips through its packed bytes or is
refused by the decoder (types the task scheduler cannot execute), with the header still readable.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cannrt import abi as d
from cannrt.abi import (
    CQE,
    CQE_BYTES,
    MAX_PARAM_BYTES,
    SQE_BYTES,
    WR_CQE,
    Cqe,
    DescriptorError,
    SqeType,
    TensorArg,
    decode_cqes,
    decode_header,
    decode_sqe,
    pack_params,
    pack_sqe,
    unpack_params,
)

# SQE type -> (layout, record class) the device must decode
DECODABLE: dict[SqeType, tuple[struct.Struct, type]] = {
    SqeType.KERNEL: (d.KERNEL_SQE, d.KernelSqe),
    SqeType.AICPU: (d.KERNEL_SQE, d.KernelSqe),
    SqeType.PLACE_HOLDER: (d.CALLBACK_SQE, d.CallbackSqe),
    SqeType.EVENT_RECORD: (d.EVENT_SQE, d.EventSqe),
    SqeType.EVENT_WAIT: (d.EVENT_SQE, d.EventSqe),
    SqeType.NOTIFY_RECORD: (d.EVENT_SQE, d.EventSqe),
    SqeType.NOTIFY_WAIT: (d.EVENT_SQE, d.EventSqe),
    SqeType.WRITE_VALUE: (d.EVENT_SQE, d.EventSqe),
    SqeType.SDMA: (d.SDMA_SQE, d.SdmaSqe),
}
UNSUPPORTED = [t for t in SqeType if t not in DECODABLE]

_RANGES = {"B": 8, "H": 16, "I": 32, "Q": 64}


def _field_strategies(layout: struct.Struct) -> list[st.SearchStrategy[int]]:
    """One integer strategy per field of a little-endian unsigned struct layout (pads skipped)."""
    strategies: list[st.SearchStrategy[int]] = []
    for count, code in re.findall(r"(\d*)([xBHIQ])", layout.format):
        if code == "x":
            continue
        strategies += [st.integers(0, (1 << _RANGES[code]) - 1)] * int(count or 1)
    return strategies


@st.composite
def sqes(draw: st.DrawFn) -> Any:
    """Any decodable SQE with every field drawn from its full range (addresses 48-bit)."""
    sqe_type = draw(st.sampled_from(sorted(DECODABLE)))
    layout, cls = DECODABLE[sqe_type]
    values = [draw(s) for s in _field_strategies(layout)]
    values[0] = int(sqe_type)
    record = cls._make(values)
    if isinstance(record, d.KernelSqe):
        record = record._replace(pc=record.pc & d.ADDRESS_MASK, param=record.param & d.ADDRESS_MASK)
    return record


def test_every_sqe_type_is_either_decodable_or_explicitly_unsupported() -> None:
    assert set(DECODABLE) | set(UNSUPPORTED) == set(SqeType)
    assert UNSUPPORTED == [SqeType.COND, SqeType.INVALID]


def test_every_layout_is_exactly_64_bytes() -> None:
    for layout, _ in DECODABLE.values():
        assert layout.size == SQE_BYTES == 64


def test_sqe_type_codes_match_the_cann_task_scheduler() -> None:
    codes = {t.name: int(t) for t in SqeType}
    assert codes == {
        "KERNEL": 0,
        "AICPU": 1,
        "PLACE_HOLDER": 3,
        "EVENT_RECORD": 4,
        "EVENT_WAIT": 5,
        "NOTIFY_RECORD": 6,
        "NOTIFY_WAIT": 7,
        "WRITE_VALUE": 8,
        "SDMA": 11,
        "COND": 20,
        "INVALID": 63,
    }


@settings(max_examples=300, deadline=None)
@given(sqes())
def test_every_decodable_sqe_round_trips_through_its_64_bytes(sqe: Any) -> None:
    data = pack_sqe(sqe)
    assert len(data) == SQE_BYTES
    decoded = decode_sqe(data)
    assert type(decoded) is type(sqe)
    assert decoded == sqe
    assert pack_sqe(decoded) == data


@settings(max_examples=200, deadline=None)
@given(sqes(), st.integers(0, 3))
def test_sqes_decode_at_any_ring_slot(sqe: Any, slot: int) -> None:
    ring = bytearray(4 * SQE_BYTES)
    ring[slot * SQE_BYTES : (slot + 1) * SQE_BYTES] = pack_sqe(sqe)
    assert decode_sqe(bytes(ring), slot * SQE_BYTES) == sqe
    assert decode_sqe(memoryview(ring), slot * SQE_BYTES) == sqe


@settings(max_examples=200, deadline=None)
@given(sqes())
def test_the_common_header_sits_in_the_first_8_bytes_in_cann_layout(sqe: Any) -> None:
    data = pack_sqe(sqe)
    byte0, byte1, block_dim, stream_id, task_id = struct.unpack_from("<BBHHH", data)
    assert byte0 & 0x3F == sqe.sqe_type  # type:6 in the low bits of byte 0
    assert byte1 == sqe.flags  # ie:2 preP:2 postP:2 wrCqe:1 reserved:1
    assert (block_dim, stream_id, task_id) == (sqe.block_dim, sqe.stream_id, sqe.task_id)
    assert decode_header(data) == (sqe.sqe_type, sqe.flags, sqe.block_dim, sqe.stream_id, sqe.task_id)


def test_wr_cqe_is_bit_6_of_byte_1() -> None:
    assert WR_CQE == 1 << 6


def test_kernel_sqe_body_carries_pc_and_param_addresses_after_the_header() -> None:
    sqe = d.KernelSqe(0, WR_CQE, 24, 7, 9, 1, 2, 1, 0, 100, 0xABCDEF012345, 0x123456789ABC)
    data = pack_sqe(sqe)
    assert int.from_bytes(data[16:24], "little") == 0xABCDEF012345  # 48-bit PC
    assert int.from_bytes(data[24:32], "little") == 0x123456789ABC  # 48-bit param address
    assert data[32:] == bytes(32)


@pytest.mark.parametrize("sqe_type", UNSUPPORTED, ids=lambda t: t.name)
@settings(max_examples=50, deadline=None)
@given(
    header=st.tuples(st.integers(0, 3), st.integers(0, 255), *[st.integers(0, 0xFFFF)] * 3),
    tail=st.binary(min_size=56, max_size=56),
)
def test_unsupported_types_are_refused_but_their_header_is_readable(
    sqe_type: SqeType, header: tuple[int, ...], tail: bytes
) -> None:
    high_bits, flags, block_dim, stream_id, task_id = header
    data = struct.pack("<BBHHH", (high_bits << 6) | sqe_type, flags, block_dim, stream_id, task_id) + tail
    with pytest.raises(DescriptorError, match=f"SQE type {int(sqe_type)} is not supported"):
        decode_sqe(data)
    assert decode_header(data) == (int(sqe_type), flags, block_dim, stream_id, task_id)


# -- completion reports -------------------------------------------------------------------------
cqes = st.builds(
    Cqe,
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0xFF),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFFFF),
    st.integers(0, (1 << 64) - 1),
    st.integers(0, (1 << 64) - 1),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(cqes, max_size=8))
def test_completion_reports_round_trip_in_a_buffer(reports: list[Cqe]) -> None:
    data = b"".join(CQE.pack(*report) for report in reports)
    assert len(data) == CQE_BYTES * len(reports)
    assert decode_cqes(data) == reports


def test_a_completion_report_names_stream_task_status_and_timestamps() -> None:
    assert Cqe._fields == (
        "stream_id",
        "task_id",
        "error_code",
        "error_type",
        "sqe_type",
        "sq_id",
        "sq_head",
        "flags",
        "start_ns",
        "end_ns",
    )


# -- kernel parameter blocks ---------------------------------------------------------------------
tensor_args = st.builds(
    TensorArg,
    st.integers(0, (1 << 64) - 1),
    st.integers(0, 255),
    st.lists(st.integers(0, (1 << 64) - 1), max_size=4).map(tuple),
)
param_values = st.one_of(
    tensor_args,
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(param_values, max_size=8))
def test_parameter_blocks_round_trip(args: list[Any]) -> None:
    block = pack_params(args)
    assert len(block) <= MAX_PARAM_BYTES
    assert unpack_params(block) == args
    assert [type(a) for a in unpack_params(block)] == [type(a) for a in args]


def test_bools_travel_as_integers() -> None:
    assert unpack_params(pack_params([True, False])) == [1, 0]


def test_a_parameter_block_over_512_bytes_is_refused() -> None:
    args = [TensorArg(0x1000, 0, (1, 2, 3, 4))] * 12  # 2 + 12 * (11 + 32) = 518 bytes
    with pytest.raises(DescriptorError, match="parameter block of 518 bytes exceeds 512"):
        pack_params(args)


@settings(max_examples=200, deadline=None)
@given(st.lists(param_values, min_size=1, max_size=6), st.data())
def test_a_truncated_parameter_block_is_a_descriptor_error(args: list[Any], data: st.DataObject) -> None:
    block = pack_params(args)
    cut = data.draw(st.integers(0, len(block) - 1))
    with pytest.raises(DescriptorError):
        unpack_params(block[:cut])


def test_an_unknown_argument_tag_is_a_descriptor_error() -> None:
    with pytest.raises(DescriptorError, match="unknown argument tag 9 at byte 2"):
        unpack_params(b"\x01\x00\x09" + bytes(16))
