"""Logical streams and the events between them (GE's StreamAllocator and event pruning).

GE's rule: one logical stream per engine, so a model entirely on AI Core runs on one stream with no
events. With `parallel` set, independent branches get streams of their own: a node continues the
stream of a producer whose first reader it is, reuses a stream whose last node is already ordered
before it, or opens a new one while fewer than `max_streams` exist.

Every edge between streams needs the consumer's stream to wait for an event recorded after the
producer; waits are pruned with vector clocks: a stream that already waited for a later point of the
producer's stream (directly or through a third stream) needs no wait, so there is at most one wait
per producer per consumer stream. The same clocks tell the memory assignment which nodes are
ordered after which (`Schedule.ordered_after`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Schedule:
    """Streams, positions, event waits and records of the task nodes, and their vector clocks."""

    stream: list[int]  # node -> logical stream
    position: list[int]  # node -> its index among its stream's nodes
    clock: list[list[int]]  # node -> per stream, the last position ordered before the node starts
    waits: list[list[int]] = field(default_factory=list)  # node -> events to wait for before it
    record: list[int | None] = field(default_factory=list)  # node -> event recorded after it
    num_streams: int = 1
    num_events: int = 0
    by_stream: list[list[int]] = field(default_factory=list)  # stream -> its nodes in order

    def ordered_after(self, node: int, required: Sequence[int]) -> bool:
        """Whether `node` starts after every stream s reached position required[s] (-1: nothing)."""
        clock = self.clock[node]
        return all(clock[s] >= need for s, need in enumerate(required))


def assign_streams(deps: Sequence[Sequence[int]], parallel: bool, max_streams: int = 4) -> list[int]:
    """A logical stream per node (nodes in topological order; deps[n] = the nodes n reads from)."""
    if not parallel or max_streams <= 1:
        return [0] * len(deps)
    stream: list[int] = []
    tails: list[int] = []  # stream -> its last node
    continued: set[int] = set()  # producers whose stream a reader already continued
    ancestors: list[set[int]] = []
    for n, producers in enumerate(deps):
        mine = set(producers)
        for p in producers:
            mine |= ancestors[p]
        ancestors.append(mine)
        chosen = next((stream[p] for p in producers if p not in continued and tails[stream[p]] == p), None)
        if chosen is None:
            free = [s for s, tail in enumerate(tails) if tail in mine]
            if free:
                chosen = min(free, key=lambda s: tails[s])
            elif len(tails) < max_streams:
                chosen = len(tails)
                tails.append(-1)
            else:
                chosen = min(range(len(tails)), key=lambda s: tails[s])
        for p in producers:
            if stream[p] == chosen:
                continued.add(p)
        stream.append(chosen)
        tails[chosen] = n
    return stream


def schedule(stream: Sequence[int], deps: Sequence[Sequence[int]]) -> Schedule:
    """Positions, pruned event waits and vector clocks for nodes placed on `stream`."""
    num_streams = max(stream, default=0) + 1
    position: list[int] = []
    by_stream: list[list[int]] = [[] for _ in range(num_streams)]
    for n, s in enumerate(stream):
        position.append(len(by_stream[s]))
        by_stream[s].append(n)
    # known[s]: per stream, the last position stream s has been ordered after so far
    known = [[-1] * num_streams for _ in range(num_streams)]
    done: list[list[int]] = []  # node -> clock after it completes (its own position included)
    clock: list[list[int]] = []
    waits: list[list[int]] = []
    record: list[int | None] = [None] * len(stream)
    events = 0
    for n, s in enumerate(stream):
        mine = known[s]
        mine[s] = position[n] - 1
        node_waits = []
        for p in sorted(set(deps[n]), key=lambda p: (stream[p], position[p])):
            ps = stream[p]
            if ps == s or mine[ps] >= position[p]:
                continue
            event = record[p]
            if event is None:
                event = record[p] = events
                events += 1
            node_waits.append(event)
            for k in range(num_streams):
                mine[k] = max(mine[k], done[p][k])
        clock.append(list(mine))
        waits.append(node_waits)
        after = list(mine)
        after[s] = position[n]
        done.append(after)
    return Schedule(list(stream), position, clock, waits, record, num_streams, events, by_stream)
