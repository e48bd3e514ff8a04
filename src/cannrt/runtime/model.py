"""A loaded offline model (aclmdlLoadFromFile[WithMem] / aclmdlExecute[Async] / aclmdlUnload).

Load takes one work block (feature maps) and one weight block, from the device or from the
caller (load_from_file_with_mem, which refuses less than query_size says), copies the weights in,
creates the model's streams and events and resolves every task once (model_program). Execute
replays the task list through each stream's own launch path: on the model's internal streams and
waits for them (sync), or with logical stream 0 on the caller's stream (async); the model's other
streams fork from and join into it with an event each. One loaded model runs either way, never
both. The user's dataset buffers are patched into the task arguments (zero copy).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import CopyKind, ParamValue, SdmaOp, TensorArg
from cannrt.dtypes import numpy_dtype
from cannrt.errors import CannError
from cannrt.kernels import KernelArgumentError
from cannrt.om.model import IoDesc, OfflineModel, Section
from cannrt.runtime import memory_ops, model_names
from cannrt.runtime.model_codes import (
    GE_DYNAMIC_BATCH_SIZE_INVALID,
    GE_PARAM_INVALID,
    INVALID_MODEL_ID,
    MODEL_INPUT_NOT_MATCH,
    MODEL_OUTPUT_NOT_MATCH,
)
from cannrt.runtime.model_program import KERNEL, MEMCPY, RECORD, GearProgram

if TYPE_CHECKING:
    from cannrt.runtime.context import Context
    from cannrt.runtime.event import Event
    from cannrt.runtime.stream import Stream

Buffer = tuple[int, int]  # (device address, bytes)
MBATCH_INPUT = "ascend_mbatch_shape_data"


class LoadedModel:
    """One offline model loaded into a context: its memory, streams, events and programs."""

    def __init__(self, context: Context, model: OfflineModel, work: Buffer = (0, 0), weight: Buffer = (0, 0)) -> None:
        self.context = context
        self.model = model
        self.mode = ""  # "sync" or "async" once executed
        self.unloaded = False
        self.gear = 0  # the gear the next execute runs (set_dynamic_batch_size)
        self._owned: list[int] = []
        self.streams: list[Stream] = []
        self.events: list[Event] = []
        self._fork: Event | None = None
        self._joins: list[Event] = []
        self._starts: list[int] = []  # per logical stream: position of its first task in the last execute
        self._caller: Stream | None = None
        self._faults_seen = 0  # device faults recorded in the context before the last execute
        self._lock = threading.Lock()
        try:
            self.work = self._block(work, model.work_size, "work")
            self.weight = self._block(weight, model.weight_size, "weight")
            if model.weights:
                host = np.frombuffer(model.weights, dtype=np.uint8)
                memory_ops.memcpy(
                    context, self.weight, weight[1] or model.weight_size, host.ctypes.data, host.nbytes,
                    CopyKind.HOST_TO_DEVICE,
                )  # fmt: skip
            self.programs = [GearProgram(g, self.work, self.weight, model.num_events) for g in model.gears]
            if not self.programs:
                raise CannError(GE_PARAM_INVALID, f"model {model.name!r} has no task list")
            for program in self.programs:
                program.check_extents(work[1] or model.work_size, model.weight_size)
                program.check_io(len(model.inputs), len(model.outputs))
                self._check_kernels(program)
            self.streams = [context.create_stream() for _ in range(max(1, model.num_streams))]
            self.events = [context.create_event() for _ in range(model.num_events)]
            if len(self.streams) > 1:
                self._fork = context.create_event()
                self._joins = [context.create_event() for _ in self.streams[1:]]
        except BaseException:
            self._release()
            raise

    # -- load ---------------------------------------------------------------------------------
    def _block(self, given: Buffer, needed: int, what: str) -> int:
        """The caller's block (at least `needed` bytes of this context's device memory) or a new one."""
        address, size = given
        if address:
            if size < needed:
                raise CannError(
                    GE_PARAM_INVALID,
                    f"{what} memory of {size} bytes is smaller than the {needed} bytes the model needs (query_size)",
                    size=size,
                    needed=needed,
                )
            memory_ops.check_device_range(self.context, address, needed, what)
            if self.context.runtime.driver.mem_extent(address) is None:
                raise CannError(GE_PARAM_INVALID, f"{what} memory 0x{address:x} is host memory, not device memory")
            return address
        if needed == 0:
            return 0
        block = memory_ops.malloc(self.context, needed)
        self._owned.append(block)
        return block

    def _check_kernels(self, program: GearProgram) -> None:
        """Every kernel task names a registered kernel and fits its signature (refused at load)."""
        runtime, device = self.context.runtime, self.context.device_id
        for index, (step, args) in enumerate(zip(program.steps, program.templates(), strict=True)):
            if step.kind != KERNEL:
                continue
            kernel, _ = runtime.kernel(device, step.kernel)
            try:
                kernel.check(args)
            except KernelArgumentError as exc:
                raise CannError(GE_PARAM_INVALID, f"task {index} (node {step.node}, {step.op_type}): {exc}") from None

    # -- execute ------------------------------------------------------------------------------
    def check_loaded(self) -> None:
        """Raise INVALID_MODEL_ID once unloaded."""
        if self.unloaded:
            raise CannError(INVALID_MODEL_ID, f"model {self.model.name!r} was unloaded")

    def _addresses(
        self, buffers: Sequence[Buffer], descs: Sequence[IoDesc], program: GearProgram, section: Section
    ) -> tuple[int, ...]:
        code = MODEL_INPUT_NOT_MATCH if section == Section.INPUT else MODEL_OUTPUT_NOT_MATCH
        what = "input" if section == Section.INPUT else "output"
        if len(buffers) != len(descs):
            raise CannError(code, f"the {what} dataset has {len(buffers)} buffers; the model has {len(descs)} {what}s")
        shapes = program.gear.input_shapes if section == Section.INPUT else program.gear.output_shapes
        addresses = []
        for index, ((address, size), desc) in enumerate(zip(buffers, descs, strict=True)):
            needed = max(self._gear_size(desc, shapes, index), program.io_extent(section, index))
            if size < needed or (needed and not address):
                raise CannError(
                    code,
                    f"{what} {index} ({desc.name}): buffer of {size} bytes at 0x{address:x}; the model needs {needed}",
                    size=size,
                    needed=needed,
                )
            if needed:
                memory_ops.check_device_range(self.context, address, needed, f"{what} {index}")
            addresses.append(address)
        return tuple(addresses)

    @staticmethod
    def _gear_size(desc: IoDesc, shapes: Sequence[tuple[int, ...]], index: int) -> int:
        if desc.name == MBATCH_INPUT or index >= len(shapes) or -1 not in desc.shape:
            return desc.size
        return math.prod(shapes[index]) * numpy_dtype(desc.dtype).itemsize

    def execute(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer], stream: Stream | None = None) -> None:
        """Replay the current gear (aclmdlExecute; aclmdlExecuteAsync with a stream). Executes of
        one model from several threads run one after the other (they share its memory)."""
        with self._lock:
            self._execute(inputs, outputs, stream)

    def _execute(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer], stream: Stream | None) -> None:
        self.check_loaded()
        mode = "sync" if stream is None else "async"
        if self.mode and self.mode != mode:
            raise CannError(
                GE_PARAM_INVALID,
                f"model {self.model.name!r} was executed {self.mode}hronously; one loaded model cannot mix "
                f"execute and execute_async",
            )
        program = self.programs[self.gear]
        in_addresses = self._addresses(inputs, self.model.inputs, program, Section.INPUT)
        out_addresses = self._addresses(outputs, self.model.outputs, program, Section.OUTPUT)
        streams = list(self.streams)
        if stream is not None:
            memory_ops.check_stream(self.context, stream)
            streams[0] = stream
            self._caller = stream
        self.mode = mode
        args = program.bind(in_addresses, out_addresses)
        if self._fork is not None:
            self._fork.record(streams[0])
            for other in streams[1:]:
                self._fork.wait_on(other)
        self._starts = [s.tail for s in streams]
        self._faults_seen = len(self.context.exception_records)
        self._replay(program, args, streams)
        if self._fork is not None:
            for join, other in zip(self._joins, streams[1:], strict=True):
                join.record(other)
                join.wait_on(streams[0])
        if stream is None:
            self._wait(program, streams)

    def _replay(self, program: GearProgram, args: list[tuple[ParamValue, ...]], streams: list[Stream]) -> None:
        events = self.events
        runtime = self.context.runtime
        if runtime.api_records is not None:  # a profile names the kernels by node and op type
            model_names.note(runtime, program.op_types)
        launches = program.launches(streams)  # the kernels' launches, held ready (bound to args)
        for step, step_args, launch in zip(program.steps, args, launches, strict=True):
            if launch is not None:
                launch()
                continue
            target = streams[step.stream]
            if step.kind == MEMCPY:
                src, dst = step_args
                assert isinstance(src, TensorArg) and isinstance(dst, TensorArg)
                target.submit_sdma(SdmaOp.COPY, CopyKind.DEVICE_TO_DEVICE, src.address, dst.address, step.nbytes)
            elif step.kind == RECORD:
                events[step.event].record(target)
            else:
                events[step.event].wait_on(target)

    def _wait(self, program: GearProgram, streams: list[Stream]) -> None:
        """Synchronize every stream of a sync execute; a fault names the node that raised it."""
        for target in reversed(streams):
            try:
                target.synchronize()
            except CannError as exc:
                node = self.failing_node(program, streams)
                if node is None:
                    raise
                raise CannError(exc.code, f"model {self.model.name!r}, node {node}: {exc.detail}") from None

    def failing_node(self, program: GearProgram, streams: list[Stream]) -> str | None:
        """'name (OpType)' of the node whose task the first fault of the last execute hit."""
        by_sq = {s.sq_id: i for i, s in enumerate(streams)}
        for record in self.context.exception_records[self._faults_seen :]:
            logical = by_sq.get(record.sq_id)
            if logical is None:
                continue
            steps = program.tasks_per_stream.get(logical, [])
            k = (record.task_id - self._starts[logical]) & 0xFFFF
            if k < len(steps):
                step = program.steps[steps[k]]
                return f"{step.node} ({step.op_type})"
        return None

    # -- dynamic batch ------------------------------------------------------------------------
    def set_batch(self, batch: int) -> None:
        """Run the gear compiled for `batch` from now on (aclmdlSetDynamicBatchSize)."""
        for index, program in enumerate(self.programs):
            if program.gear.batch == batch and batch > 0:
                self.gear = index
                return
        batches = [p.gear.batch for p in self.programs]
        raise CannError(GE_DYNAMIC_BATCH_SIZE_INVALID, f"batch {batch} is not one of the model's gears {batches}")

    # -- unload -------------------------------------------------------------------------------
    def unload(self) -> None:
        """Wait for the model's work, then free its streams, events and memory (aclmdlUnload)."""
        with self._lock:
            self._unload()

    def _unload(self) -> None:
        self.check_loaded()
        if self._caller is not None and not self._caller.destroyed:
            with contextlib.suppress(CannError):
                self._caller.synchronize()
        self._release()
        self.unloaded = True

    def _release(self) -> None:
        for stream in self.streams:
            if not stream.destroyed:
                with contextlib.suppress(CannError):
                    stream.destroy()
        for event in [*self.events, *self._joins, *([self._fork] if self._fork else [])]:
            if not event.destroyed:
                event.destroy()
        for block in self._owned:
            with contextlib.suppress(CannError):
                memory_ops.free(self.context, block)
        self._owned.clear()
