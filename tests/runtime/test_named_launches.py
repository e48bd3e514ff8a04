"""A profile's op names of named launches: the same mapping a dict keyed (device, stream, task id,
doorbell ns) would be, whatever order the launches are noted in, held in about 20 bytes each."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from cannrt.runtime.named_launches import NamedLaunches


@pytest.mark.parametrize("seed", range(6))
def test_the_launches_map_as_a_dict_of_the_same_notes_would(seed: int) -> None:
    rng = random.Random(seed)
    names, expected = NamedLaunches(), dict[tuple[int, int, int, int], str]()
    clock = {(d, s): 0 for d in range(2) for s in range(3)}
    for step in range(3000):
        device, stream = rng.randrange(2), rng.randrange(3)
        if rng.random() < 0.9:  # in doorbell order on its stream, sometimes at the same time
            clock[(device, stream)] += rng.choice((0, 1, 1, 7))
            arrival = clock[(device, stream)]
        else:  # out of order (another thread's clock) or a launch noted again
            arrival = rng.randrange(clock[(device, stream)] + 1)
        key = (device, stream, rng.randrange(1 << 16) if rng.random() < 0.5 else step & 0xFFFF, arrival)
        if expected and rng.random() < 0.05:
            key = rng.choice(list(expected))
        name = f"node{rng.randrange(40)}"
        names.note(key, name)
        expected[key] = name
    assert len(names) == len(expected)
    assert dict(names) == expected
    assert all(names[key] == name for key, name in expected.items())
    assert names.get((0, 0, 1, -5)) is None and (9, 9, 9, 9) not in names


def test_a_million_named_launches_hold_about_twenty_bytes_each() -> None:
    names = NamedLaunches()
    tracemalloc.start()
    try:
        for index in range(200_000):
            names.note((0, index % 4, index & 0xFFFF, 1_000_000 + index), f"layer{index % 70}/conv")
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / 200_000 < 32  # a dict entry with its key tuple held about 190
    assert names[(0, 1, 5, 1_000_005)] == "layer5/conv"
