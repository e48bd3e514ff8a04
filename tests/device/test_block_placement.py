"""Block placement: the shortcuts of device.placement give exactly the cores and times of placing
block by block on the least-loaded core, and the same heap contents afterwards."""

from __future__ import annotations

import heapq
import random

import pytest

from cannrt.device import placement
from cannrt.device.placement import place, place_one_by_one


@pytest.fixture(autouse=True)
def shortcuts_at_every_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """place() hands few blocks to the one-by-one loop; here the shortcuts run at every count."""
    monkeypatch.setattr(placement, "ONE_BY_ONE_BELOW", 0)


def _heap(free_at: list[int], ids: list[int]) -> list[tuple[int, int]]:
    heap = list(zip(free_at, ids, strict=True))
    heapq.heapify(heap)
    return heap


def _both(heap: list[tuple[int, int]], block_ns: tuple[int, ...], start: int, launch_ns: int) -> None:
    ours, reference = list(heap), list(heap)
    placed = place(ours, block_ns, start, launch_ns, True)
    expected = place_one_by_one(reference, block_ns, start, launch_ns, True)
    assert placed == expected
    assert sorted(ours) == sorted(reference)
    assert place(list(heap), block_ns, start, launch_ns, False)[:2] == expected[:2]


def test_every_block_on_a_free_core_in_least_loaded_order() -> None:
    heap = _heap([5, 0, 3, 0, 9, 2], [0, 1, 2, 3, 4, 5])
    end, cores, spans = place(heap, (10, 10, 7, 7), 9, 4, True)
    assert cores == (1, 3, 5, 2)  # free at 0, 0, 2, 3: then by id
    assert end == 19
    assert spans == ((1, 9, 19), (3, 9, 19), (5, 9, 16), (2, 9, 16))
    assert sorted(heap) == [(5, 0), (9, 4), (16, 2), (16, 5), (19, 1), (19, 3)]


def test_whole_rounds_of_equal_blocks_pay_the_launch_after_the_first() -> None:
    heap = _heap([0, 0, 0], [4, 2, 7])
    end, cores, spans = place(heap, (10,) * 7, 0, 3, True)
    assert cores == (2, 4, 7)
    # round r ends at r * 10 + (r - 1) * 3: 10, 23, 36; the third round runs on core 2 only
    assert end == 36
    assert spans[3:] == ((2, 10, 23), (4, 10, 23), (7, 10, 23), (2, 23, 36))
    assert sorted(heap) == [(23, 4), (23, 7), (36, 2)]


@pytest.mark.parametrize("seed", range(300))
def test_random_placements_match_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    cores = rng.randint(1, 12)
    ids = rng.sample(range(64), cores)
    start = rng.randint(0, 50)
    busy = rng.random() < 0.5
    free_at = [rng.randint(0, 100) if busy else rng.randint(0, start) for _ in ids]
    count = rng.randint(1, 3 * cores)
    shape = rng.choice(["equal", "two", "any", "zero"])
    if shape == "equal":
        block_ns = (rng.randint(1, 20),) * count
    elif shape == "two":  # as block_fractions splits units: a longer block first, then the rest
        longer = rng.randint(0, count)
        base = rng.randint(1, 20)
        block_ns = (base + 1,) * longer + (base,) * (count - longer)
    elif shape == "any":
        block_ns = tuple(rng.randint(1, 30) for _ in range(count))
    else:
        block_ns = tuple(rng.randint(0, 2) for _ in range(count))
    _both(_heap(free_at, ids), block_ns, start, rng.choice([0, 3]))
