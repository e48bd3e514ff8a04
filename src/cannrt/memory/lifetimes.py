"""Tensor lifetimes from a graph's memory topology, made safe across streams.

The graph engine hands over its ops in submission order (each on a stream, each possibly waiting
on events recorded after earlier ops) and its tensors (bytes, producing op, consuming ops). On one
stream, a tensor is free once its last consumer ran. Across streams it is not: an op of another
stream that is not ordered after that consumer may run at the same time. So a tensor's lifetime
is extended until, on every stream, the next op is ordered after its last use (the event that
orders the reuse); tensors whose extended lifetimes do not overlap can share memory without a race.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from cannrt.memory.planner import Buffer

ALIGNMENT = 512  # graph engine tensors start on 512-byte boundaries


class TopologyError(ValueError):
    """A memory topology that refers to ops or streams that do not exist."""


@dataclass(frozen=True)
class Op:
    """One op in submission order: its stream and the earlier ops it waits for through events."""

    name: str
    stream: int
    waits_on: tuple[int, ...] = ()


@dataclass(frozen=True)
class TensorUse:
    """A tensor of the graph: bytes, the op that writes it and the ops that read it."""

    name: str
    nbytes: int
    producer: int
    consumers: tuple[int, ...] = ()


@dataclass
class Topology:
    """What the graph engine tells the runtime about memory (the seed's memory topology)."""

    ops: list[Op] = field(default_factory=list)
    tensors: list[TensorUse] = field(default_factory=list)

    def add_op(self, name: str, stream: int = 0, waits_on: Sequence[int] = ()) -> int:
        """Append an op; returns its index."""
        self.ops.append(Op(name, stream, tuple(waits_on)))
        return len(self.ops) - 1

    def add_tensor(self, name: str, nbytes: int, producer: int, consumers: Sequence[int] = ()) -> None:
        """Declare a tensor written by producer and read by consumers (op indices)."""
        self.tensors.append(TensorUse(name, nbytes, producer, tuple(consumers)))


def vector_clocks(ops: Sequence[Op]) -> list[dict[int, int]]:
    """For each op, the highest op index of each stream that happens before or at it."""
    clocks: list[dict[int, int]] = []
    last_on_stream: dict[int, int] = {}
    for index, op in enumerate(ops):
        clock: dict[int, int] = {}
        sources = [last_on_stream[op.stream]] if op.stream in last_on_stream else []
        for waited in op.waits_on:
            if not 0 <= waited < index:
                raise TopologyError(f"op {index} ({op.name}) waits on op {waited}, which does not come before it")
            sources.append(waited)
        for source in sources:
            for stream, position in clocks[source].items():
                if clock.get(stream, -1) < position:
                    clock[stream] = position
        clock[op.stream] = index
        clocks.append(clock)
        last_on_stream[op.stream] = index
    return clocks


class _Orders:
    """Happens-before queries over a topology's ops."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.clocks = vector_clocks(ops)
        self.by_stream: dict[int, list[int]] = {}
        for index, op in enumerate(ops):
            self.by_stream.setdefault(op.stream, []).append(index)

    def ordered_after(self, earlier: int, later: int) -> bool:
        """True if op `later` can only start after op `earlier` finished."""
        return self.clocks[later].get(self.ops[earlier].stream, -1) >= earlier

    def safe_release(self, last_use: int) -> int:
        """First op index from which every stream's ops are ordered after last_use (len(ops) if never)."""
        release = last_use + 1
        for indices in self.by_stream.values():
            start = bisect.bisect_right(indices, last_use)
            if start == len(indices):
                continue  # the stream has no later op
            lo, hi = start, len(indices)  # ordering is monotone along a stream: binary search
            while lo < hi:
                mid = (lo + hi) // 2
                if self.ordered_after(last_use, indices[mid]):
                    hi = mid
                else:
                    lo = mid + 1
            if lo == len(indices):
                return len(self.ops)
            release = max(release, indices[lo])
        return release


def lifetimes(topology: Topology, alignment: int = ALIGNMENT) -> list[Buffer]:
    """Planner buffers [producer, safe release) for every tensor of the topology."""
    ops = topology.ops
    orders = _Orders(ops)
    buffers = []
    for tensor in topology.tensors:
        uses = (tensor.producer, *tensor.consumers)
        if any(not 0 <= use < len(ops) for use in uses):
            raise TopologyError(f"tensor {tensor.name} refers to an op outside 0..{len(ops) - 1}")
        if any(use < tensor.producer for use in tensor.consumers):
            raise TopologyError(f"tensor {tensor.name} is read before op {tensor.producer} writes it")
        last_uses = [u for u in uses if not any(v != u and orders.ordered_after(u, v) for v in uses)]
        upper = max(orders.safe_release(use) for use in last_uses)
        size = -(-max(1, tensor.nbytes) // alignment) * alignment
        buffers.append(Buffer(tensor.name, tensor.producer, upper, size, alignment))
    return buffers
