"""Streaming collection: records kept in memory up to a chunk, then written to disk as runs.

A `TaskSpool` is the sink a tracing device hands its task records to, a columnar `TaskChunk` at a
time: it keeps the newest chunks in memory up to a few MiB and writes older ones as runs (their
arrays as raw int64, their few task shapes pickled), so a run of any length is collected in bounded
memory, a short one touches no disk, and nothing is built per task while collecting. A
`RecordSpool` is the runtime's sink of host API records: a list that holds at most `chunk` records;
a full chunk is sorted and written as one run of pickled batches (plain tuples). `sorted_records()`
reads every run back merged into one ordered stream (a k-way merge holding one batch per run). The
files are this process's own scratch data, written and read by it alone; they are removed by
`close()`.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import os
import pickle
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cannrt.abi import TaskRecord
from cannrt.abi.records import MARK_FIELDS, ROW_FIELDS, TaskChunk

CHUNK = 16384  # records kept in memory before a run is written
MEMORY_ROWS = 1 << 16  # task rows a TaskSpool keeps in memory (3.5 MiB) before its oldest chunk is written
MEMORY_CHUNKS = 4  # and chunks at most (each one maps whole pages, however few its rows)
BATCH = 512  # records per pickled batch inside a run (what the merge holds per run)


class RecordSpool(list[Any]):
    """Records appended as they complete; spilled to `directory` every `chunk` records."""

    def __init__(
        self,
        directory: str | Path,
        make: Callable[[Any], Any],
        key: Callable[[Any], Any],
        chunk: int = CHUNK,
    ) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.make = make  # rebuilds a record from its plain tuple (e.g. TaskRecord._make)
        self.key = key  # the order of sorted_records()
        self.chunk = max(1, chunk)
        self.runs: list[Path] = []
        self.spilled = 0  # records written to runs
        self._lock = threading.Lock()  # a spill and a read of the runs do not interleave
        self._first, self._last = -1, 0  # earliest start_ns, latest end_ns of the records spilled

    def append(self, item: Any) -> None:
        """Keep a record; a full chunk goes to disk (the device appends under its own lock)."""
        list.append(self, item)
        if len(self) >= self.chunk:
            self.spill()

    @property
    def collected(self) -> int:
        """Records collected so far (on disk and in memory)."""
        return self.spilled + len(self)

    @property
    def first(self) -> int:
        """The earliest start_ns collected (-1 if none)."""
        starts = [r.start_ns for r in self] + ([self._first] if self.spilled else [])
        return int(min(starts)) if starts else -1

    @property
    def last(self) -> int:
        """The latest end_ns collected."""
        return int(max([r.end_ns for r in self] + [self._last]))

    def spill(self) -> None:
        """Write the records in memory as one sorted run and forget them."""
        with self._lock:
            self._spill()

    def _spill(self) -> None:
        if not len(self):
            return
        items = sorted(self, key=self.key)
        self._first, self._last = self.first, self.last
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"run_{len(self.runs):06d}.pkl"
        with path.open("wb") as handle:
            for start in range(0, len(items), BATCH):
                pickle.dump([tuple(r) for r in items[start : start + BATCH]], handle, pickle.HIGHEST_PROTOCOL)
        self.runs.append(path)
        self.spilled += len(items)
        del self[:]

    def _read_run(self, path: Path) -> Iterator[Any]:
        make = self.make
        with path.open("rb") as handle:
            while True:
                try:
                    batch = pickle.load(handle)  # our own scratch file (see the module docstring)
                except EOFError:
                    return
                yield from map(make, batch)

    def sorted_records(self) -> Iterator[Any]:
        """Every record collected, in key order (runs merged with those still in memory)."""
        memory = sorted(self, key=self.key)
        if not self.runs:
            return iter(memory)
        return heapq.merge(*(self._read_run(p) for p in self.runs), memory, key=self.key)

    def close(self) -> None:
        """Drop every record and remove the runs."""
        for path in self.runs:
            path.unlink(missing_ok=True)
        self.runs.clear()
        self.spilled = 0
        del self[:]


class HostSpool(RecordSpool):
    """The host calls' sink: API records spooled like tasks (host threads append at once: one at a
    time here, so a spill loses none); `op_names` is the profile's op-name collector, which the
    runtime reaches through this sink."""

    def __init__(
        self,
        directory: str | Path,
        make: Callable[[Any], Any],
        key: Callable[[Any], Any],
        chunk: int = CHUNK,
        op_names: Any = None,
    ):
        super().__init__(directory, make, key, chunk)
        self._host_lock = threading.Lock()
        self.op_names = op_names

    def append(self, item: Any) -> None:
        """Keep a host call."""
        with self._host_lock:
            super().append(item)


class TaskSpool:
    """One device's task records, taken a chunk at a time (`add_chunk`, the device's TaskSink). The
    newest chunks stay in memory up to `memory_rows` rows (and MEMORY_CHUNKS chunks); past that the
    oldest are written as runs, so a short profile touches no disk and a long one holds a bounded
    tail."""

    def __init__(
        self, directory: str | Path, key: Callable[[Any], Any], chunk: int = CHUNK, memory_rows: int = MEMORY_ROWS
    ) -> None:
        self.directory = Path(directory)
        self.key = key  # the order of sorted_records(); it must begin with start_ns (runs whose
        # start times do not interleave are read one after another, not merged)
        self.chunk = max(1, chunk)
        self.memory_rows = memory_rows
        self.runs: list[Path | TaskChunk] = []  # per chunk taken: its run on disk, or itself while in memory
        self.collected = 0  # task records taken
        self._spans: list[tuple[int, int, int] | None] = []  # per run: earliest, latest start_ns, latest
        # end_ns (worked out when first asked for, or when the run is written: not while collecting)
        self._kept: deque[int] = deque()  # indices in runs of the chunks in memory, oldest first
        self._kept_rows = 0

    def add_chunk(self, chunk: TaskChunk) -> None:
        """Take one chunk (its rows are the device's buffer, handed over, not copied); the oldest
        kept past the memory budget go to disk. Called with the device's lock held."""
        if not chunk.tasks:
            return
        self.collected += chunk.tasks
        self._spans.append(None)
        self._kept.append(len(self.runs))
        self.runs.append(chunk)
        self._kept_rows += chunk.tasks
        while self._kept and (self._kept_rows > self.memory_rows or len(self._kept) > MEMORY_CHUNKS):
            self._write(self._kept.popleft())

    def _span(self, index: int) -> tuple[int, int, int]:
        """A run's earliest and latest start_ns and latest end_ns."""
        span = self._spans[index]
        if span is None:
            rows = self.read_chunk(self.runs[index]).rows
            span = self._spans[index] = (int(rows[:, 1].min()), int(rows[:, 1].max()), int(rows[:, 2].max()))
        return span

    @property
    def starts(self) -> list[tuple[int, int]]:
        """Per run: its earliest and latest start_ns."""
        return [self._span(i)[:2] for i in range(len(self.runs))]

    @property
    def first(self) -> int:
        """The earliest start_ns taken (-1 if none)."""
        return min((self._span(i)[0] for i in range(len(self.runs))), default=-1)

    @property
    def last(self) -> int:
        """The latest end_ns taken."""
        return max((self._span(i)[2] for i in range(len(self.runs))), default=0)

    @property
    def written(self) -> int:
        """Runs on disk."""
        return sum(1 for run in self.runs if isinstance(run, Path))

    def _write(self, index: int) -> None:
        """Write a kept chunk as a run: its rows, marks and extras as raw int64 (`.bin`), then its
        layout and task shapes (`.pkl`)."""
        chunk = self.runs[index]
        assert isinstance(chunk, TaskChunk)
        self._span(index)  # while its rows are at hand
        self.directory.mkdir(parents=True, exist_ok=True)
        run = self.directory / f"run_{index:06d}"
        with run.with_suffix(".bin").open("wb") as handle:
            for part in (chunk.rows, chunk.marks, chunk.extras):
                np.ascontiguousarray(part, np.int64).tofile(handle)
        with run.with_suffix(".pkl").open("wb") as handle:
            shapes = [tuple(p) for p in chunk.shapes]
            layout = (chunk.device_id, chunk.tasks, len(chunk.marks), len(chunk.extras))
            pickle.dump((layout, shapes), handle, pickle.HIGHEST_PROTOCOL)
        self.runs[index] = run
        self._kept_rows -= chunk.tasks

    def read_chunk(self, run: Path | TaskChunk) -> TaskChunk:
        """One run as it was taken."""
        if isinstance(run, TaskChunk):
            return run
        with run.with_suffix(".pkl").open("rb") as handle:
            layout, shapes = pickle.load(handle)  # our own scratch file (see the module docstring)
        device, tasks, marks, _ = layout  # (the extras are the rest of the data)
        data = np.fromfile(run.with_suffix(".bin"), np.int64)
        at = tasks * ROW_FIELDS
        return TaskChunk(
            device,
            data[:at].reshape(tasks, ROW_FIELDS),
            data[at : at + marks * MARK_FIELDS].reshape(marks, MARK_FIELDS),
            [TaskRecord._make(p) for p in shapes],
            data[at + marks * MARK_FIELDS :],
        )

    def _read_run(self, run: Path | TaskChunk) -> Iterator[TaskRecord]:
        return self.read_chunk(run).in_order(BATCH)

    def sorted_records(self) -> Iterator[TaskRecord]:
        """Every record taken, in key order (runs merged; read one after another when each starts
        after the one before ends starting, as the runs of one stream do)."""
        if len(self.runs) == 1:
            return self._read_run(self.runs[0])
        if all(before[1] < after[0] for before, after in itertools.pairwise(self.starts)):
            return itertools.chain.from_iterable(map(self._read_run, self.runs))
        return heapq.merge(*(self._read_run(run) for run in self.runs), key=self.key)

    def close(self) -> None:
        """Drop every record and remove the runs."""
        for run in self.runs:
            if isinstance(run, Path):
                run.with_suffix(".bin").unlink(missing_ok=True)
                run.with_suffix(".pkl").unlink(missing_ok=True)
        self.runs.clear()
        self._spans.clear()
        self._kept.clear()
        self._kept_rows = 0
        self.collected = 0


def merged(spools: Sequence[RecordSpool | TaskSpool], key: Callable[[Any], Any]) -> Iterator[Any]:
    """The records of several spools in one key order."""
    if len(spools) == 1:
        return iter(spools[0].sorted_records())
    return heapq.merge(*(s.sorted_records() for s in spools), key=key)


class ScratchDir:
    """A folder for a profile's runs, inside this process's private temporary folder (made once,
    mode 0700, removed at interpreter exit): it is made when a spool first writes there (a short
    profile makes none) and removed by `cleanup()`."""

    _counter = itertools.count()
    _root: tuple[int, Path] | None = None  # (the process that made it, the folder)

    def __init__(self) -> None:
        self.path = self._process_root() / f"profile_{next(self._counter):06d}"
        self._pid = os.getpid()  # a forked child's copy of this object must not remove it

    @classmethod
    def _process_root(cls) -> Path:
        if cls._root is None or cls._root[0] != os.getpid():  # none yet, or a forked child's parent's
            root = Path(tempfile.mkdtemp(prefix="cannrt-prof-"))
            cls._root = (os.getpid(), root)
            atexit.register(_remove_root, os.getpid(), root)
        return cls._root[1]

    def sub(self, name: str) -> Path:
        """A subfolder for one spool (made by the spool when it first writes)."""
        return self.path / f"{next(self._counter):03d}_{name}"

    def cleanup(self) -> None:
        """Remove the folder and everything in it (only in the process that made it: a forked
        child that collects its copy of the profile leaves the parent's runs alone)."""
        if os.getpid() == self._pid:
            shutil.rmtree(self.path, ignore_errors=True)


def _remove_root(pid: int, root: Path) -> None:
    """At exit: the process's scratch root goes (not a forked child's: the folder is its parent's)."""
    if os.getpid() == pid:
        shutil.rmtree(root, ignore_errors=True)
