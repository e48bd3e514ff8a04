"""The op names of a profile's named launches, held compactly while the profile collects.

A model replay names every kernel launch after its graph node, so a profile of a long model run
notes millions of them. Per (device, stream) the launches come in doorbell order; each one keeps
its doorbell time and task id in int64 arrays and an index into one table of distinct names:
20 bytes per launch (a dict keyed by (device, stream, task id, doorbell ns) held about 190).
A lookup bisects the stream's doorbell times. A launch noted out of doorbell order (another host
thread's clock) goes to a small dict of its own.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Mapping

OpKey = tuple[int, int, int, int]  # (device, stream, task id, doorbell ns) of a named launch


class _Stream:
    __slots__ = ("arrivals", "names", "tasks")

    def __init__(self) -> None:
        self.arrivals = array("q")
        self.tasks = array("q")
        self.names = array("I")  # index into NamedLaunches' table of distinct names


class NamedLaunches(Mapping[OpKey, str]):
    """(device, stream, task id, doorbell ns) -> op name, for the launches noted so far."""

    def __init__(self) -> None:
        self._streams: dict[tuple[int, int], _Stream] = {}
        self._table: list[str] = []
        self._index: dict[str, int] = {}
        self._loose: dict[OpKey, str] = {}  # noted out of their stream's doorbell order
        self._count = 0

    def note(self, key: OpKey, name: str) -> None:
        """The launch of key is named name (a later note of the same key wins, as in a dict)."""
        device, stream_id, task, arrival = key
        stream = self._streams.get((device, stream_id))
        if stream is None:
            stream = self._streams[(device, stream_id)] = _Stream()
        if stream.arrivals and arrival <= stream.arrivals[-1]:
            if key not in self._loose and self._find(key) is None:
                self._count += 1
            self._loose[key] = name
            return
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self._table)
            self._table.append(name)
        stream.arrivals.append(arrival)
        stream.tasks.append(task)
        stream.names.append(index)
        self._count += 1

    def __getitem__(self, key: OpKey) -> str:
        name = self.get(key)
        if name is None:
            raise KeyError(key)
        return name

    def get(self, key: OpKey, default: str | None = None) -> str | None:  # type: ignore[override]
        """The op name of key's launch, else default (no KeyError raised: most lookups of a
        profile's writer are tasks nobody named)."""
        if self._loose:
            loose = self._loose.get(key)
            if loose is not None:
                return loose
        found = self._find(key)
        if found is None:
            return default
        stream, at = found
        return self._table[stream.names[at]]

    def _find(self, key: OpKey) -> tuple[_Stream, int] | None:
        """Where key sits in its stream's arrays, if it is there."""
        device, stream_id, task, arrival = key
        stream = self._streams.get((device, stream_id))
        if stream is None:
            return None
        arrivals = stream.arrivals
        at = bisect.bisect_left(arrivals, arrival)
        if at < len(arrivals) and arrivals[at] == arrival and stream.tasks[at] == task:
            return stream, at
        return None

    def __iter__(self) -> Iterator[OpKey]:
        for (device, stream_id), stream in self._streams.items():
            for arrival, task in zip(stream.arrivals, stream.tasks, strict=True):
                yield (device, stream_id, task, arrival)
        yield from (key for key in self._loose if self._find(key) is None)

    def __len__(self) -> int:
        return self._count
