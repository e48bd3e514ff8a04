"""The L2 model: LRU at granules; repeating the last access (the shortcut) gives the hit rates
and the recency order that touching every granule again gives."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from cannrt.device.l2 import GRANULE_SHIFT, L2Model


class ReferenceLru:
    """Touch read then written granules one by one, no shortcut."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lines: OrderedDict[int, None] = OrderedDict()

    def access(self, reads: tuple[int, ...], writes: tuple[int, ...]) -> float:
        hit = 0
        for index, granule in enumerate((*reads, *writes)):
            if granule in self.lines:
                hit += index < len(reads)
                self.lines.move_to_end(granule)
            else:
                self.lines[granule] = None
                if len(self.lines) > self.capacity:
                    self.lines.popitem(last=False)
        return hit / len(reads) if reads else 0.0


def test_a_repeated_access_hits_every_read() -> None:
    l2 = L2Model(4 << GRANULE_SHIFT)
    touched = (1, 2, 1), (3,)
    assert l2.access(touched) == pytest.approx(1 / 3)  # the second read of 1 hits
    assert l2.access(touched) == 1.0
    assert l2.access(((), (3,))) == 0.0


def test_an_access_larger_than_the_cache_is_never_all_hits() -> None:
    l2 = L2Model(2 << GRANULE_SHIFT)
    touched: tuple[tuple[int, ...], tuple[int, ...]] = ((1, 2, 3), ())
    assert l2.access(touched) == 0.0
    assert l2.access(touched) == 0.0  # each granule was evicted before it came round again


@pytest.mark.parametrize("seed", range(40))
def test_random_accesses_match_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.randint(1, 8)
    l2, reference = L2Model(capacity << GRANULE_SHIFT), ReferenceLru(capacity)
    shapes = [
        (
            tuple(rng.randint(0, 12) for _ in range(rng.randint(0, 4))),
            tuple(rng.randint(0, 12) for _ in range(rng.randint(0, 3))),
        )
        for _ in range(5)
    ]
    for _ in range(200):
        touched = rng.choice(shapes)  # the same pairs come back, as a launch shape's plan hands them out
        assert l2.access(touched) == reference.access(*touched)
        assert list(l2._lines) == list(reference.lines)
