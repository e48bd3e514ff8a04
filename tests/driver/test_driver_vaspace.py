"""The driver's virtual address allocator: aligned, disjoint reservations inside the window,
released ranges coalesce so the window can be used whole again."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cannrt.driver.vaspace import AddressRangeError, VaAllocator

BASE = 1 << 40
LIMIT = BASE + (1 << 24)  # a 16 MiB window keeps exhaustion reachable


class VaAllocatorMachine(RuleBasedStateMachine):
    """Random reserve/release sequences against a model of what is reserved."""

    def __init__(self) -> None:
        super().__init__()
        self.va = VaAllocator(BASE, LIMIT)
        self.live: dict[int, int] = {}  # start -> size

    @rule(size=st.integers(1, 1 << 22), shift=st.integers(0, 21))
    def reserve(self, size: int, shift: int) -> None:
        alignment = 1 << shift
        try:
            start = self.va.reserve(size, alignment)
        except AddressRangeError:
            assert not self._fits_somewhere(size, alignment)
            return
        assert start % alignment == 0
        self._add(start, size)

    @rule(data=st.data(), size=st.integers(1, 1 << 16))
    def reserve_at_an_expected_address(self, data: st.DataObject, size: int) -> None:
        expect = data.draw(st.integers(BASE, LIMIT - 1))
        free_there = all(expect + size <= s or s + n <= expect for s, n in self.live.items()) and expect + size <= LIMIT
        try:
            start = self.va.reserve(size, 4096, expect)
        except AddressRangeError:
            assert not free_there and not self._fits_somewhere(size, 4096)
            return
        if free_there:
            assert start == expect  # the expected address is honoured when it is free
        else:
            assert start % 4096 == 0  # otherwise an ordinary aligned reservation
        self._add(start, size)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        start = data.draw(st.sampled_from(sorted(self.live)))
        assert self.va.release(start) == self.live.pop(start)
        assert self.va.size_of(start) is None

    @rule(offset=st.integers(1, 4095))
    def releasing_a_non_start_is_refused(self, offset: int) -> None:
        target = BASE + offset if not self.live else min(self.live) + offset
        if target in self.live:
            return
        with pytest.raises(AddressRangeError):
            self.va.release(target)

    @invariant()
    def reservations_are_inside_the_window_and_disjoint(self) -> None:
        spans = sorted(self.live.items())
        for start, size in spans:
            assert start >= BASE and start + size <= LIMIT
            assert self.va.size_of(start) == size
        for (a, n), (b, _) in itertools.pairwise(spans):
            assert a + n <= b

    def teardown(self) -> None:
        for start in list(self.live):
            self.va.release(start)
        # everything coalesced: the whole window is one free range again
        assert self.va.reserve(LIMIT - BASE, 1) == BASE

    def _add(self, start: int, size: int) -> None:
        for other, other_size in self.live.items():
            assert start + size <= other or other + other_size <= start, "overlapping reservations"
        self.live[start] = size

    def _fits_somewhere(self, size: int, alignment: int) -> bool:
        cursor = BASE
        for start, used in [*sorted(self.live.items()), (LIMIT, 0)]:
            aligned = -(-cursor // alignment) * alignment
            if aligned + size <= start:
                return True
            cursor = max(cursor, start + used)
        return False


TestVaAllocator = VaAllocatorMachine.TestCase
TestVaAllocator.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_a_zero_or_negative_reservation_is_refused() -> None:
    va = VaAllocator(BASE, LIMIT)
    for size in (0, -4096):
        with pytest.raises(AddressRangeError, match=f"cannot reserve {size} bytes"):
            va.reserve(size, 4096)


def test_release_merges_with_both_neighbours() -> None:
    va = VaAllocator(BASE, BASE + 3 * 4096)
    a, b, c = (va.reserve(4096, 4096) for _ in range(3))
    assert (a, b, c) == (BASE, BASE + 4096, BASE + 8192)
    va.release(a)
    va.release(c)
    va.release(b)
    assert va.reserve(3 * 4096, 4096) == BASE
