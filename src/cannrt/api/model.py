"""Model: an offline model loaded on a device, called with numpy arrays (the Pythonic acl.mdl).

`Model.load("net.om")` loads a file `cannrt atc` wrote; `Model.load("net.onnx")` compiles the ONNX
model first, as atc would. Calling the model copies the arrays into its input buffers, replays
its task list on the model's stream (the buffers are patched in, zero copy) and copies the
outputs back. A dynamic-batch model runs the gear of the first input's batch.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cannrt.abi import CopyKind
from cannrt.api.device import Device
from cannrt.dtypes import numpy_dtype
from cannrt.errors import CannError
from cannrt.om.model import IoDesc, OfflineModel
from cannrt.runtime import memory_ops
from cannrt.runtime.event import EVENT_SYNC, EVENT_TIME_LINE
from cannrt.runtime.model import MBATCH_INPUT, LoadedModel
from cannrt.runtime.model_codes import INVALID_MODEL_ID, MODEL_INPUT_NOT_MATCH
from cannrt.runtime.model_file import read_model


@dataclass(frozen=True)
class FeatureMapBytes:
    """The memory plan of a gear: planned work bytes, the sum of every feature map (no reuse), and
    the lower bound (the most bytes live at once)."""

    planned: int
    unplanned: int
    lower_bound: int


def feature_map_bytes(model: OfflineModel, gear: int = -1) -> FeatureMapBytes:
    """The memory plan figures of one gear (the largest by default)."""
    chosen = model.gears[gear]
    plan = chosen.plan
    unplanned = sum(t.size for t in plan)
    deltas: dict[int, int] = {}
    for tensor in plan:
        deltas[tensor.first] = deltas.get(tensor.first, 0) + tensor.size
        deltas[tensor.last + 1] = deltas.get(tensor.last + 1, 0) - tensor.size
    live = bound = 0
    for index in sorted(deltas):
        live += deltas[index]
        bound = max(bound, live)
    return FeatureMapBytes(chosen.work_size, unplanned, bound)


@dataclass
class RunStats:
    """What the last call did: modelled device time, host time of the submit and the whole call."""

    device_ns: int = 0
    submit_s: float = 0.0
    wall_s: float = 0.0


class Model:
    """An offline model loaded into one work block and one weight block of a device."""

    def __init__(self, model: OfflineModel, device: Device | None = None) -> None:
        self.device = device or Device(0)
        self.offline = model
        context = self.device.context
        self._loaded = LoadedModel(context, model)
        self._stream = context.create_stream()
        self._start = context.create_event(EVENT_SYNC | EVENT_TIME_LINE)
        self._end = context.create_event(EVENT_SYNC | EVENT_TIME_LINE)
        self._buffers: dict[tuple[str, int], tuple[int, int]] = {}  # (kind, index) -> (address, bytes)
        self.stats = RunStats()
        self.closed = False

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: Device | None = None, **options: Any) -> Model:
        """Load an .om file, or compile an .onnx file first; options are atc's, as the fields of
        cannrt.graph.CompileOptions (input_shape, precision_mode, dynamic_batch_size, ...)."""
        if os.fspath(path).endswith(".onnx"):
            return cls.compile(path, device, **options)
        if options:
            raise TypeError(f"compile options {sorted(options)} apply to .onnx models only")
        return cls(read_model(path), device)

    @classmethod
    def compile(cls, source: Any, device: Device | None = None, **options: Any) -> Model:
        """Compile an ONNX model (path, bytes or onnx.ModelProto) as `cannrt atc` would, and load
        it; cannrt.graph.GraphError (a ValueError naming the node) if it cannot be compiled."""
        from cannrt.graph import CompileOptions, compile_model

        return cls(compile_model(source, CompileOptions(**options)), device)

    def __repr__(self) -> str:
        names = ", ".join(io.name for io in self.inputs)
        return f"<Model {self.offline.name!r} ({names}) on device {self.device.index}>"

    @property
    def inputs(self) -> tuple[IoDesc, ...]:
        """The model's inputs the caller passes (the dynamic-batch shape input excluded)."""
        return tuple(io for io in self.offline.inputs if io.name != MBATCH_INPUT)

    @property
    def outputs(self) -> tuple[IoDesc, ...]:
        """The model's outputs."""
        return self.offline.outputs

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, *arrays: Any, **named: Any) -> list[np.ndarray]:
        """Run the model on numpy arrays (positional, or by input name); returns its outputs."""
        return self.run(dict(named) if named else list(arrays))

    def run(self, feeds: Sequence[Any] | Mapping[str, Any]) -> list[np.ndarray]:
        """Run the model on a list of arrays in input order, or a dict by input name."""
        began = time.perf_counter()
        if self.closed:
            raise CannError(INVALID_MODEL_ID, f"model {self.offline.name!r} was closed")
        arrays = self._arrays(feeds)
        self._choose_gear(arrays)
        gear = self.offline.gears[self._loaded.gear]
        context = self.device.context
        inputs = []
        for index, array in enumerate(arrays):
            address, size = self._buffer("in", index, max(array.nbytes, 1))
            if array.nbytes:
                memory_ops.memcpy(context, address, size, array.ctypes.data, array.nbytes, CopyKind.HOST_TO_DEVICE)
            inputs.append((address, array.nbytes))
        if len(self.inputs) < len(self.offline.inputs):  # the dynamic-batch shape input
            address, _ = self._buffer("in", len(inputs), 8)
            inputs.append((address, 8))
        outputs = []
        for index, shape in enumerate(gear.output_shapes):
            dtype = numpy_dtype(self.outputs[index].dtype)
            nbytes = math.prod(shape) * dtype.itemsize
            outputs.append((self._buffer("out", index, max(nbytes, 1))[0], nbytes))
        submit = time.perf_counter()
        self._start.record(self._stream)
        self._loaded.execute(inputs, outputs, self._stream)
        self._end.record(self._stream)
        submitted = time.perf_counter()
        self._stream.synchronize()
        results = []
        for (address, nbytes), shape, io in zip(outputs, gear.output_shapes, self.outputs, strict=True):
            host = np.empty(shape, dtype=numpy_dtype(io.dtype))
            if nbytes:
                memory_ops.memcpy(context, host.ctypes.data, nbytes, address, nbytes, CopyKind.DEVICE_TO_HOST)
            results.append(host)
        self.stats = RunStats(
            int(self._start.elapsed_ms(self._end) * 1e6), submitted - submit, time.perf_counter() - began
        )
        return results

    def _arrays(self, feeds: Sequence[Any] | Mapping[str, Any]) -> list[np.ndarray]:
        """The feeds as contiguous arrays of the inputs' dtypes and shapes; MODEL_INPUT_NOT_MATCH otherwise."""
        descs = self.inputs
        if isinstance(feeds, Mapping):
            unknown = sorted(set(feeds) - {io.name for io in descs})
            missing = [io.name for io in descs if io.name not in feeds]
            if unknown or missing:
                raise CannError(MODEL_INPUT_NOT_MATCH, f"inputs: unknown {unknown}, missing {missing}")
            values = [feeds[io.name] for io in descs]
        else:
            values = list(feeds)
        if len(values) != len(descs):
            raise CannError(
                MODEL_INPUT_NOT_MATCH, f"the model takes {len(descs)} inputs, got {len(values)}", given=len(values)
            )
        arrays = []
        for value, io in zip(values, descs, strict=True):
            dtype = numpy_dtype(io.dtype)
            array = np.asarray(value)
            if not np.can_cast(array.dtype, dtype, "same_kind"):
                raise CannError(MODEL_INPUT_NOT_MATCH, f"input {io.name!r} is {dtype}, got {array.dtype}")
            array = np.asarray(array, dtype=dtype, order="C")  # keeps a 0-d shape, unlike ascontiguousarray
            fits = len(array.shape) == len(io.shape) and all(
                d in (-1, a) for d, a in zip(io.shape, array.shape, strict=False)
            )
            if not fits:
                raise CannError(
                    MODEL_INPUT_NOT_MATCH,
                    f"input {io.name!r} has shape {tuple(io.shape)}, got {array.shape}",
                    expected=tuple(io.shape),
                    given=array.shape,
                )
            arrays.append(array)
        return arrays

    def _choose_gear(self, arrays: list[np.ndarray]) -> None:
        """A dynamic-batch model runs the gear of the first dynamic input's batch."""
        for array, io in zip(arrays, self.inputs, strict=True):
            if -1 in io.shape:
                self._loaded.set_batch(int(array.shape[io.shape.index(-1)]))
                return

    def _buffer(self, kind: str, index: int, nbytes: int) -> tuple[int, int]:
        """A device buffer kept between calls (grown when a larger gear needs more)."""
        found = self._buffers.get((kind, index))
        if found is None or found[1] < nbytes:
            if found is not None:
                memory_ops.free(self.device.context, found[0])
            found = self._buffers[(kind, index)] = (memory_ops.malloc(self.device.context, nbytes), nbytes)
        return found

    # -- teardown -----------------------------------------------------------------------------
    def close(self) -> None:
        """Unload the model and free its buffers (aclmdlUnload)."""
        if self.closed:
            return
        self.closed = True
        self._loaded.unload()
        for address, _ in self._buffers.values():
            memory_ops.free(self.device.context, address)
        self._buffers.clear()
        self._stream.destroy()
        self._start.destroy()
        self._end.destroy()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def feature_map_bytes(self) -> FeatureMapBytes:
        """Planned, unplanned and lower-bound feature-map bytes of the largest gear."""
        return feature_map_bytes(self.offline)
