"""Placing a kernel's blocks on the cores of its kind: each block takes the least-loaded core
(earliest free, then lowest id), as the task scheduler hands out blocks one by one.

`place` gives the same cores and times as placing block by block with a heap op each
(`place_one_by_one`), but without the loop in the two cases model launches meet: every block
finds a free core (block_dim <= the free cores), and equal blocks on cores that are all free
(whole rounds). The heap is a list of (free at, core id); only its contents matter (the
scheduler reads its least element), not their layout.
"""

from __future__ import annotations

import heapq
from operator import itemgetter

Heap = list[tuple[int, int]]  # (free at, core id)
Span = tuple[int, int, int]  # (core, start, end) of one block
Placed = tuple[int, tuple[int, ...], tuple[Span, ...]]  # end, cores in order of first use, spans
_core = itemgetter(1)
ONE_BY_ONE_BELOW = 16  # fewer blocks: a heap op each costs less than sorting and re-heapifying the cores


def place(heap: list[tuple[int, int]], block_ns: tuple[int, ...], start: int, launch_ns: int, spans: bool) -> Placed:
    """Place blocks of block_ns nanoseconds from time start (a block on a core still busy at
    start also pays launch_ns); the heap is updated in place. Spans only when `spans`."""
    count = len(block_ns)
    if not count:
        return start, (), ()
    shortest = min(block_ns)
    if shortest <= 0 or count < ONE_BY_ONE_BELOW:  # a block ending at start could take its core
        return place_one_by_one(heap, block_ns, start, launch_ns, spans)  # again; or few heap ops
    order = sorted(heap)  # linear when the heap is sorted, as this branch leaves it
    if count <= len(order) and order[count - 1][0] <= start:  # a free core for every block
        cores = tuple(map(_core, order[:count]))
        heap[:] = sorted([*zip(map(start.__add__, block_ns), cores, strict=True), *order[count:]])  # a heap
        placed = tuple(zip(cores, [start] * count, [start + ns for ns in block_ns], strict=True)) if spans else ()
        return start + max(block_ns), cores, placed
    if order[-1][0] <= start and shortest == max(block_ns):  # whole rounds of equal blocks
        return _rounds(heap, order, count, shortest, start, launch_ns, spans)
    return place_one_by_one(heap, block_ns, start, launch_ns, spans)


def _rounds(
    heap: list[tuple[int, int]],
    order: list[tuple[int, int]],
    count: int,
    ns: int,
    start: int,
    launch_ns: int,
    spans: bool,
) -> Placed:
    """count > cores equal blocks of ns on cores all free at start: the first round takes the
    cores least-loaded first and ends at start + ns on every core; from then on the cores tie, so
    round r (from 1) runs on them in id order and ends at start + r * ns + (r - 1) * launch_ns."""
    first = list(map(_core, order))
    by_id = sorted(first)
    width = len(first)
    rounds = -(-count // width)
    last = count - (rounds - 1) * width  # blocks in the last round
    end = start + rounds * ns + (rounds - 1) * launch_ns
    before = end - ns - launch_ns  # the end of the round before the last
    heap[:] = [(end, core) for core in by_id[:last]] + [(before, core) for core in by_id[last:]]
    heapq.heapify(heap)
    placed: tuple[Span, ...] = ()
    if spans:
        made = [(core, start, start + ns) for core in first]
        for block in range(width, count):
            at = start + (block // width) * (ns + launch_ns) - launch_ns
            made.append((by_id[block % width], at, at + ns + launch_ns))
        placed = tuple(made)
    return end, tuple(first), placed


def place_one_by_one(
    heap: list[tuple[int, int]], block_ns: tuple[int, ...], start: int, launch_ns: int, spans: bool
) -> Placed:
    """The definition: each block in turn on the least-loaded core, one heap op per block."""
    used: list[int] = []
    end = start
    made: list[Span] = []
    for ns in block_ns:
        free_at, core = heap[0]
        at = free_at if free_at > start else start
        finish = at + ns + (launch_ns if at > start else 0)
        heapq.heapreplace(heap, (finish, core))
        if finish > end:
            end = finish
        if core not in used:
            used.append(core)
        if spans:
            made.append((core, at, finish))
    return end, tuple(used), tuple(made)
