"""A gear's task list resolved against a loaded model's memory, ready to replay (GE's task sink).

At load every TensorRef into the work or weight block becomes a kernel TensorArg once; what
points into the user's input and output buffers is bound at execute (zero copy) and kept while
the caller passes the same buffers again, so a replay is a loop of sends over prebuilt tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cannrt.abi import ParamValue, TensorArg, tensor_nbytes
from cannrt.errors import CannError
from cannrt.om.model import (
    EventRecordTask,
    EventWaitTask,
    Gear,
    KernelTask,
    MemcpyTask,
    Section,
    TensorRef,
)
from cannrt.runtime.model_codes import GE_PARAM_INVALID

if TYPE_CHECKING:
    from cannrt.runtime.stream import Stream

KERNEL, MEMCPY, RECORD, WAIT = 0, 1, 2, 3
Addresses = tuple[int, ...]


@dataclass(frozen=True)
class Step:
    """One task of the replay: kind, logical stream and what it sends."""

    kind: int
    stream: int
    kernel: str = ""  # KERNEL
    block_dim: int = 0
    node: str = ""  # ONNX node name: the launch's op name in dumps and reports
    op_type: str = ""
    event: int = 0  # RECORD / WAIT
    nbytes: int = 0  # MEMCPY


@dataclass(frozen=True)
class IoSlot:
    """An argument of step `step` (position `arg`) inside user buffer `index` of `section`."""

    step: int
    arg: int  # argument position (a memcpy: 0 source, 1 destination)
    section: Section
    index: int
    offset: int
    dtype: int
    shape: tuple[int, ...]


class GearProgram:
    """The replayable form of one gear over one work block and one weight block."""

    def __init__(self, gear: Gear, work: int, weight: int, num_events: int) -> None:
        self.gear = gear
        self.steps: list[Step] = []
        self._templates: list[list[ParamValue]] = []  # kernel args or [src, dst] of a memcpy
        self._slots: list[IoSlot] = []
        self._extents: list[tuple[int, Section, int, int]] = []  # (step, WORK/WEIGHT, offset, end)
        self._bound: tuple[Addresses, Addresses] | None = None
        self.args: list[tuple[ParamValue, ...]] = []  # per step, bound to the last buffers
        self.tasks_per_stream: dict[int, list[int]] = {}  # logical stream -> its step indices
        self.op_types: dict[str, str] = {}  # node -> ONNX op type of the kernel steps (profiles name them)
        # per step, its launch held on its stream (None for the other steps), for self.args on the streams
        self._held: tuple[list[tuple[ParamValue, ...]], tuple[Stream, ...], list[Callable[[], int] | None]] | None
        self._held = None
        recorded: set[int] = set()
        for task in gear.tasks:
            index = len(self.steps)
            self.tasks_per_stream.setdefault(task.stream, []).append(index)
            if isinstance(task, KernelTask):
                self.steps.append(Step(KERNEL, task.stream, task.kernel, task.block_dim, task.node, task.op_type))
                if task.node:
                    self.op_types[task.node] = task.op_type
                self._templates.append(
                    [self._resolve(ref, index, pos, work, weight) for pos, ref in enumerate(task.args)]
                )
            elif isinstance(task, MemcpyTask):
                self.steps.append(Step(MEMCPY, task.stream, node=task.node, op_type="MemcpyAsync", nbytes=task.nbytes))
                pair = [
                    self._resolve(task.src, index, 0, work, weight),
                    self._resolve(task.dst, index, 1, work, weight),
                ]
                self._templates.append(pair)
            elif isinstance(task, EventRecordTask | EventWaitTask):
                if not 0 <= task.event < num_events:
                    raise CannError(GE_PARAM_INVALID, f"task {index} uses event {task.event} of {num_events}")
                if isinstance(task, EventWaitTask) and task.event not in recorded:
                    raise CannError(GE_PARAM_INVALID, f"task {index} waits on event {task.event} before its record")
                recorded.add(task.event)
                self.steps.append(
                    Step(RECORD if isinstance(task, EventRecordTask) else WAIT, task.stream, event=task.event)
                )
                self._templates.append([])
            else:
                raise CannError(GE_PARAM_INVALID, f"task {index}: unknown task kind {type(task).__name__}")

    def _resolve(self, ref: object, step: int, pos: int, work: int, weight: int) -> ParamValue:
        """A TensorRef into the model's memory as a TensorArg; scalars as they are; I/O refs as
        placeholders (address 0) noted in the slots."""
        if not isinstance(ref, TensorRef):
            if isinstance(ref, bool) or not isinstance(ref, int | float):
                raise CannError(GE_PARAM_INVALID, f"task {step}: argument {pos} is {type(ref).__name__}")
            return ref
        shape = tuple(int(d) for d in ref.shape)
        if ref.section in (Section.WORK, Section.WEIGHT):
            arg = TensorArg((work if ref.section == Section.WORK else weight) + ref.offset, ref.dtype, shape)
            self._extents.append((step, Section(ref.section), ref.offset, ref.offset + tensor_nbytes(arg)))
            return arg
        self._slots.append(IoSlot(step, pos, Section(ref.section), ref.index, ref.offset, ref.dtype, shape))
        return TensorArg(0, ref.dtype, shape)

    def check_extents(self, work_size: int, weight_size: int) -> None:
        """Every work / weight argument lies inside its own section (a bad model is refused at load)."""
        sizes = {Section.WORK: work_size, Section.WEIGHT: weight_size}
        for step, section, offset, end in self._extents:
            if offset < 0 or end > sizes[section]:
                raise CannError(
                    GE_PARAM_INVALID,
                    f"task {step}: a tensor at {section.name} offset {offset} runs to {end}, "
                    f"past the section's {sizes[section]} bytes",
                )

    def io_extent(self, section: Section, index: int) -> int:
        """Bytes of user buffer `index` the tasks touch (the buffer must hold at least these)."""
        ends = [
            s.offset + tensor_nbytes(TensorArg(0, s.dtype, s.shape))
            for s in self._slots
            if s.section == section and s.index == index
        ]
        return max(ends, default=0)

    def templates(self) -> list[tuple[ParamValue, ...]]:
        """Every step's arguments with the I/O slots at address 0 (for the load-time checks)."""
        return [tuple(t) for t in self._templates]

    def check_io(self, inputs: int, outputs: int) -> None:
        """Every I/O slot names an input / output the model has."""
        for slot in self._slots:
            limit = inputs if slot.section == Section.INPUT else outputs
            if not 0 <= slot.index < limit:
                where = slot.section.name.lower()
                raise CannError(GE_PARAM_INVALID, f"task {slot.step} refers to {where} {slot.index} of {limit}")

    def launches(self, streams: Sequence[Stream]) -> list[Callable[[], int] | None]:
        """Per step, its kernel launch on its stream held ready (Launcher.prepare: a replay skips
        the launch checks), None for the other steps; made again once the steps' arguments were
        bound anew or the streams differ (an async execute on another caller's stream)."""
        held = self._held
        targets = tuple(streams)
        if held is not None and held[0] is self.args and held[1] == targets:
            return held[2]
        launches = [
            targets[step.stream].launcher.prepare(step.kernel, step.block_dim, args, step.node)
            if step.kind == KERNEL
            else None
            for step, args in zip(self.steps, self.args, strict=True)
        ]
        self._held = (self.args, targets, launches)
        return launches

    def bind(self, inputs: Addresses, outputs: Addresses) -> list[tuple[ParamValue, ...]]:
        """Every step's arguments with the I/O slots pointing into the given buffers; the
        previous binding when the buffers are the same."""
        key = (inputs, outputs)
        if self._bound == key:
            return self.args
        args = [list(t) for t in self._templates] if self._bound is None else [list(a) for a in self.args]
        for slot in self._slots:
            base = inputs[slot.index] if slot.section == Section.INPUT else outputs[slot.index]
            args[slot.step][slot.arg] = TensorArg(base + slot.offset, slot.dtype, slot.shape)
        self.args = [tuple(a) for a in args]
        self._bound = key
        return self.args
