"""Memory assignment (GE's GraphMemoryAssigner): the weight section, the feature-map plan, the I/O blocks.

- Weights: packed in order of first use from offset 512, each rounded up to 512 bytes.
- Feature maps: one buffer per tensor (a data-free reshape shares its input's buffer, a Concat
  input placed in place lives in its output's, graph.inplace; the group lives from the first
  write to the last read of any member), sizes rounded up to 512 bytes and
  512-aligned, placed by cannrt.memory.planner from their lifetimes on the kernel-launch timeline.
  Across streams a buffer stays live until, on every stream, the next launch is ordered after all
  its readers (event waits), so two tensors share bytes only where a dependency orders them.
- Model inputs and outputs: zero copy (tasks point into the user's buffers); their blocks are laid
  out after the feature maps in the work section, as aclmdlQuerySize counts them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cannrt.graph.errors import GraphError
from cannrt.graph.inplace import InPlace
from cannrt.graph.streams import Schedule
from cannrt.memory.planner import Buffer, PlannerError, lower_bound, plan
from cannrt.om import Section

ALIGN = 512
WEIGHT_BASE = 512


def round_up(n: int, unit: int = ALIGN) -> int:
    return -(-n // unit) * unit


@dataclass(frozen=True)
class Place:
    """Where a tensor's bytes start: a section, an offset, and the user's buffer for I/O."""

    section: Section
    offset: int
    index: int = 0


class WeightSection:
    """The model's read-only weights, shared by every gear (a weight is placed once by name)."""

    def __init__(self) -> None:
        self.size = WEIGHT_BASE
        self._placed: dict[str, list[tuple[np.ndarray, int]]] = {}
        self._chunks: list[tuple[int, np.ndarray]] = []

    def place(self, name: str, array: np.ndarray) -> int:
        """The offset of a weight; the same name with the same contents (another gear) shares it."""
        for other, offset in self._placed.get(name, []):
            if other is array or (
                other.dtype == array.dtype and other.shape == array.shape and np.array_equal(other, array)
            ):
                return offset
        offset = self.size
        data = np.ascontiguousarray(array)
        self._chunks.append((offset, data))
        self._placed.setdefault(name, []).append((array, offset))
        self.size = offset + round_up(max(data.nbytes, 1))
        return offset

    def data(self) -> bytes:
        """The section's bytes (zero padding between weights)."""
        out = np.zeros(self.size if self._chunks else 0, np.uint8)
        for offset, array in self._chunks:
            out[offset : offset + array.nbytes] = array.reshape(-1).view(np.uint8)
        return out.tobytes()


@dataclass(frozen=True)
class Lifetime:
    """One work buffer: the tensors that share it, its launch-index interval, its rounded size."""

    name: str  # the buffer's root tensor
    members: tuple[str, ...]
    lower: int
    upper: int
    size: int
    stream: int
    writer: int  # task node writing it (-1 for none)
    last_reader: int  # task node reading it last in launch order (writer when unread)


@dataclass(frozen=True)
class FeatureMapPlan:
    places: dict[str, Place]  # every tensor in the work section or the I/O buffers
    lifetimes: tuple[Lifetime, ...]
    offsets: dict[str, int]  # buffer root -> offset in the work section
    peak: int  # bytes of the feature maps
    unplanned: int  # sum of the rounded buffer sizes
    bound: int  # their lower bound
    io_blocks: tuple[tuple[str, int, int], ...]  # (name, offset, size) laid out after the peak
    work_size: int
    optimal: bool


@dataclass(frozen=True)
class Usage:
    """What the task nodes touch, in launch order (spans are [first step, end step))."""

    spans: Sequence[tuple[int, int]]
    reads: Sequence[Sequence[str]]
    writes: Sequence[Sequence[str]]
    scratch: Sequence[Sequence[tuple[str, int]]]  # (name, bytes) of each node's temporaries
    total_steps: int


def plan_feature_maps(
    usage: Usage,
    sizes: Mapping[str, int],
    inplace: InPlace,
    inputs: Sequence[str],
    outputs: Sequence[str],
    sched: Schedule,
    time_limit: float,
) -> FeatureMapPlan:
    """Places for every non-constant tensor the tasks touch, and the planned work section. Tensors
    sharing bytes (reshape aliases, concat inputs placed in their output) form one buffer, owned
    by their root, live from the first write of any of them to the last read of any."""
    places: dict[str, Place] = {}
    groups: dict[str, list[str]] = {}
    inside: dict[str, int] = {}  # tensor -> byte offset in its root
    # in first-use order, not a set's: the planner breaks ties by input order, so the plan (and the
    # .om) must not depend on the hash seed
    touched = (n for names in (*usage.reads, *usage.writes) for n in names)
    # an output no task touches still has its place when its inputs were placed in it (a Concat)
    owners = {owner for owner, _ in inplace.slots.values()}
    filled = (n for n in outputs if inplace.root(n)[0] in owners)
    root: dict[str, str] = {}  # tensor -> the tensor owning its bytes (each chain walked once)
    for name in dict.fromkeys((*touched, *filled)):
        root[name], inside[name] = inplace.root(name)
        groups.setdefault(root[name], []).append(name)
    io_of: dict[str, Place] = {}
    for i, name in enumerate(inputs):
        io_of.setdefault(root.get(name) or inplace.root(name)[0], Place(Section.INPUT, 0, i))
    for j, name in enumerate(outputs):
        io_of.setdefault(root.get(name) or inplace.root(name)[0], Place(Section.OUTPUT, 0, j))
    writers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for nodes_of, by_node in ((writers, usage.writes), (readers, usage.reads)):
        for n, names in enumerate(by_node):
            for name in names:
                nodes_of.setdefault(root[name], []).append(n)
    lifetimes: list[Lifetime] = []
    for key, members in groups.items():
        place = io_of.get(key)  # io_of is keyed by root: every member's root is key
        if place is not None:
            for member in members:
                places[member] = Place(place.section, inside[member], place.index)
            continue
        if key not in writers:
            raise GraphError(f"tensor {key!r} is read but nothing writes it")
        group = tuple(sorted(members))
        lifetimes.append(_lifetime(key, group, writers[key], readers.get(key, []), sizes[key], usage, sched))
    for n, temps in enumerate(usage.scratch):
        for name, nbytes in temps:
            lifetimes.append(_lifetime(name, (name,), [n], [], nbytes, usage, sched))
    buffers = [Buffer(t.name, t.lower, t.upper, t.size, ALIGN) for t in lifetimes]
    try:
        packing = plan(buffers, time_limit=time_limit) if buffers else None
    except PlannerError as exc:
        raise GraphError(f"memory planning failed: {exc}") from None
    offsets = dict(zip((b.id for b in buffers), packing.offsets, strict=True)) if packing else {}
    peak = packing.peak if packing else 0
    for t in lifetimes:
        for member in t.members:
            places[member] = Place(Section.WORK, offsets[t.name] + inside.get(member, 0))
    for i, name in enumerate(inputs):
        places.setdefault(name, Place(Section.INPUT, 0, i))
    io_blocks, end = [], round_up(peak)
    for name in (*inputs, *outputs):
        size = round_up(sizes.get(name, 0))
        io_blocks.append((name, end, size))
        end += size
    return FeatureMapPlan(
        places,
        tuple(lifetimes),
        offsets,
        peak,
        sum(b.size for b in buffers),
        lower_bound(buffers) if buffers else 0,
        tuple(io_blocks),
        end,
        bool(packing and packing.optimal),
    )


def _lifetime(
    name: str,
    members: tuple[str, ...],
    writers: Sequence[int],
    readers: Sequence[int],
    nbytes: int,
    usage: Usage,
    sched: Schedule,
) -> Lifetime:
    """The buffer's [lower, upper) on the launch timeline, from its first writer's launch, extended
    until every stream's next launch is ordered after all the nodes that touch it."""
    touched = [*writers, *readers]
    writer = min(writers, key=lambda n: usage.spans[n][0])
    lower = usage.spans[writer][0]
    upper = max(usage.spans[n][1] for n in touched)
    required = [-1] * sched.num_streams
    for n in touched:
        s = sched.stream[n]
        required[s] = max(required[s], sched.position[n])
    if sched.num_streams > 1:
        for nodes in sched.by_stream:
            first = _first_ordered_after(sched, nodes, required)
            upper = max(upper, usage.spans[first][0] if first is not None else usage.total_steps)
    last = max(touched, key=lambda n: usage.spans[n][1])
    size = round_up(max(nbytes, 1))
    return Lifetime(name, members, lower, max(upper, lower + 1), size, sched.stream[writer], writer, last)


def _first_ordered_after(sched: Schedule, nodes: Sequence[int], required: Sequence[int]) -> int | None:
    """The first of a stream's nodes that starts after all `required` positions (clocks grow along
    a stream, so a binary search finds it)."""
    keys = _Ordered(sched, nodes, required)
    index = bisect.bisect_left(keys, True)
    return nodes[index] if index < len(nodes) else None


class _Ordered(Sequence[bool]):
    def __init__(self, sched: Schedule, nodes: Sequence[int], required: Sequence[int]) -> None:
        self.sched, self.nodes, self.required = sched, nodes, required

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, index: int) -> bool:  # type: ignore[override]
        return self.sched.ordered_after(self.nodes[index], self.required)
