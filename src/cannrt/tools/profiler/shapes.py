"""Task shapes: what a task's CSV cells, trace args and op figures are, apart from its ids and times.

Launches of one kernel with the same arguments, blocks and duration (the common case of a long
profile: a loop or a model run many times) give the same cells; the writer computes them once per
shape (`ShapeCache`) and formats only the ids and times per task, which keeps it near the rate at
which records are collected. A record whose fields cannot be hashed is computed on its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from cannrt.abi import TaskRecord, Work
from cannrt.config import ChipSpec
from cannrt.tools.profiler import summary
from cannrt.tools.profiler.records import is_kernel, kernel_type, task_type
from cannrt.tools.profiler.stats import KernelFigures, KernelTotals, ProfileStats, kernel_figures
from cannrt.tools.profiler.trace import TaskShape

CACHE_SHAPES = 4096  # shapes kept; the cache starts over when full (memory stays bounded)
WAIT_COLUMN = 10  # op_summary: the cells after Task Wait Time(us) belong to the shape
# Work's fields as a plain tuple: hashed and compared in C (a frozen dataclass hashes in Python, and
# records read back from different spooled batches hold equal but distinct Work objects)
WORK_FIELDS = attrgetter(*(f.name for f in dataclasses.fields(Work)))


_NEEDS_QUOTES = re.compile('[,"\r\n]').search


def csv_cell(text: str) -> str:
    """A CSV cell as csv.writer writes it (quoted if it holds a comma, quote or line break)."""
    if _NEEDS_QUOTES(text):
        return '"' + text.replace('"', '""') + '"'
    return text


class Shape:
    """The per-shape part of a task's outputs (cells as CSV text)."""

    __slots__ = (
        "count",
        "duration",
        "duration_csv",
        "figures",
        "kernel",
        "kernel_type",
        "l2",
        "name",
        "op_tail",
        "op_type",
        "task_type",
        "totals",
        "trace",
    )

    def __init__(
        self, record: TaskRecord, chip: ChipSpec, group: str, op_name: str | None, op_type: str | None
    ) -> None:
        self.trace = TaskShape(record, chip, op_name)
        self.duration = record.end_ns - record.start_ns
        self.duration_csv = summary.us(self.duration)
        self.count = 0  # kernel tasks of this shape not yet added to their op's totals
        self.totals: KernelTotals | None = None
        self.name = csv_cell(op_name or record.name)
        self.kernel_type = csv_cell(kernel_type(record))
        self.kernel = is_kernel(record)
        self.op_type = self.task_type = self.op_tail = self.l2 = ""
        self.figures: KernelFigures | None = None
        if self.kernel:
            row = summary.op_row(record, 0, chip, group, op_name, op_type)
            self.op_type, self.task_type = csv_cell(row[5]), csv_cell(task_type(record))
            self.op_tail = ",".join(map(csv_cell, row[WAIT_COLUMN + 1 :]))
            self.l2 = summary.l2_row(record, op_name)[3]
            self.figures = kernel_figures(record, chip)


def block_spans(record: TaskRecord) -> int | tuple[int, ...]:
    """The durations of a task's blocks (of its one block: an int)."""
    blocks = record.blocks
    return tuple(end - start for _, start, end in blocks) if len(blocks) != 1 else blocks[0][2] - blocks[0][1]


# what a task's per-shape outputs depend on, besides its duration, block spans and objects below
_PLAIN_FIELDS = attrgetter(
    "name", "sqe_type", "core_kind", "block_dim", "l2_hit", "bytes_read", "bytes_written", "copy_kind", "status"
)


def same_shape(record: TaskRecord, seen: TaskRecord) -> bool:
    """True if the record's shape_key fields (op name and type aside) are those of `seen`: the
    argument, work and pipe objects the same ones (records of one shape of a chunk share them),
    the rest equal."""
    return (
        record.args is seen.args
        and record.work is seen.work
        and record.pipes is seen.pipes
        and record.outputs is seen.outputs
        and record.end_ns - record.start_ns == seen.end_ns - seen.start_ns
        and _PLAIN_FIELDS(record) == _PLAIN_FIELDS(seen)
        and block_spans(record) == block_spans(seen)
    )


def shape_key(record: TaskRecord, op_name: str | None, op_type: str | None) -> tuple[Any, ...]:
    """Every field a task's per-shape outputs depend on (everything but ids and times)."""
    work = WORK_FIELDS(record.work) if record.work is not None else None
    duration = record.end_ns - record.start_ns
    objects = (record.pipes, work, record.args, record.outputs)
    return (*_PLAIN_FIELDS(record), duration, block_spans(record), *objects, op_name, op_type)


class ShapeCache:
    """Shapes by key, made on first sight. A kernel task counts in its shape (`count`); the counts
    go to the op totals of `stats` when the cache starts over and at `flush()`."""

    def __init__(self, chip: ChipSpec, group: str, stats: ProfileStats) -> None:
        self.chip, self.group, self.stats = chip, group, stats
        self._shapes: dict[tuple[Any, ...], Shape] = {}
        self._loose: list[Shape] = []  # the last shape made outside the cache (unhashable fields)
        self._last: tuple[TaskRecord, str | None, str | None, Shape] | None = None  # the last record's

    def get(self, record: TaskRecord, op_name: str | None, op_type: str | None) -> Shape:
        last = self._last
        if last is not None and last[1] == op_name and last[2] == op_type and same_shape(record, last[0]):
            return last[3]  # the shape of the task before (no key made)
        shape = self._get(record, op_name, op_type)
        self._last = (record, op_name, op_type, shape)
        return shape

    def _get(self, record: TaskRecord, op_name: str | None, op_type: str | None) -> Shape:
        key = shape_key(record, op_name, op_type)
        try:
            shape = self._shapes.get(key)
        except TypeError:  # an argument that cannot be hashed
            self._add(self._loose)
            self._loose = [self._make(record, op_name, op_type)]
            return self._loose[0]
        if shape is None:
            if len(self._shapes) >= CACHE_SHAPES:
                self.flush()
                self._shapes.clear()
            shape = self._shapes[key] = self._make(record, op_name, op_type)
        return shape

    def _make(self, record: TaskRecord, op_name: str | None, op_type: str | None) -> Shape:
        shape = Shape(record, self.chip, self.group, op_name, op_type)
        if shape.kernel:
            shape.totals = self.stats.kernel_totals(op_name or record.name, record)
        return shape

    def flush(self) -> None:
        """Add the kernel tasks counted in the shapes to their ops' totals."""
        self._add(self._shapes.values())
        self._add(self._loose)

    @staticmethod
    def _add(shapes: Iterable[Shape]) -> None:
        for shape in shapes:
            if shape.count and shape.totals is not None and shape.figures is not None:
                shape.totals.add_many(shape.count, shape.duration, shape.figures)
                shape.count = 0
