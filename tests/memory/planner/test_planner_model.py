"""The buffer model: construction rules, the lower bound and packing validation."""

from __future__ import annotations

import pytest

from cannrt.memory.planner import Buffer, InvalidBufferError, InvalidPackingError, lower_bound
from cannrt.memory.planner.buffers import check_unique_ids, validate


def test_a_buffer_needs_a_nonempty_lifetime() -> None:
    with pytest.raises(InvalidBufferError, match="lower 5 >= upper 5"):
        Buffer("x", 5, 5, 8)


def test_a_buffer_cannot_have_a_negative_size() -> None:
    with pytest.raises(InvalidBufferError, match="negative size"):
        Buffer("x", 0, 1, -1)


def test_a_buffer_alignment_is_at_least_one() -> None:
    with pytest.raises(InvalidBufferError, match="alignment"):
        Buffer("x", 0, 1, 4, alignment=0)


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(InvalidBufferError, match="duplicate buffer id 'a'"):
        check_unique_ids([Buffer("a", 0, 1, 1), Buffer("a", 2, 3, 1)])


def test_lower_bound_is_the_largest_sum_of_live_sizes() -> None:
    buffers = [Buffer("a", 0, 10, 4), Buffer("b", 2, 5, 3), Buffer("c", 4, 8, 5)]
    assert lower_bound(buffers) == 12  # at time 4 all three are live


def test_lifetimes_are_half_open_so_back_to_back_buffers_are_never_live_together() -> None:
    buffers = [Buffer("a", 0, 5, 7), Buffer("b", 5, 9, 7)]
    assert lower_bound(buffers) == 7
    assert validate(buffers, [0, 0]) == 7


def test_lower_bound_of_nothing_is_zero() -> None:
    assert lower_bound([]) == 0


def test_validate_rejects_buffers_overlapping_in_time_and_address() -> None:
    buffers = [Buffer("a", 0, 5, 8), Buffer("b", 4, 9, 8)]
    with pytest.raises(InvalidPackingError, match="a and b overlap"):
        validate(buffers, [0, 7])


def test_validate_accepts_buffers_touching_in_address() -> None:
    buffers = [Buffer("a", 0, 5, 8), Buffer("b", 4, 9, 8)]
    assert validate(buffers, [0, 8]) == 16


def test_validate_finds_an_overlap_hidden_between_other_buffers() -> None:
    buffers = [Buffer("a", 0, 10, 4), Buffer("b", 0, 10, 4), Buffer("c", 0, 10, 100)]
    with pytest.raises(InvalidPackingError, match="overlap"):
        validate(buffers, [0, 8, 2])


def test_validate_checks_alignment() -> None:
    with pytest.raises(InvalidPackingError, match="not aligned to 16"):
        validate([Buffer("a", 0, 1, 8, alignment=16)], [8])


def test_validate_checks_capacity() -> None:
    with pytest.raises(InvalidPackingError, match="exceeds capacity 10"):
        validate([Buffer("a", 0, 1, 8)], [4], capacity=10)


def test_validate_rejects_negative_offsets_and_wrong_lengths() -> None:
    with pytest.raises(InvalidPackingError, match="negative offset"):
        validate([Buffer("a", 0, 1, 8)], [-8])
    with pytest.raises(InvalidPackingError, match="2 offsets for 1 buffers"):
        validate([Buffer("a", 0, 1, 8)], [0, 0])


def test_zero_sized_buffers_never_conflict() -> None:
    buffers = [Buffer("a", 0, 5, 8), Buffer("z", 0, 5, 0)]
    assert validate(buffers, [0, 4]) == 8
