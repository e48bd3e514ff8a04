"""cannrt as an ONNX backend (onnx.backend.base): prepare, run_model, run_node, supports_device.

prepare compiles the model with cannrt's graph engine (as `cannrt atc` does, keeping every
tensor's ONNX dtype: must_keep_origin_dtype) and loads it on device 0; the returned rep runs it
on numpy arrays. onnx's own suite runs against it:

    backend_test = onnx.backend.test.BackendTest(cannrt.onnx_backend, __name__)

cannrt executes on its simulated NPU; it answers supports_device("CPU") as well as ("NPU"),
because the suite generates its test cases for the device names "CPU" and "CUDA" only.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

from cannrt.api.model import Model
from cannrt.dtypes import NUMPY_TO_ACL
from cannrt.errors import CannError
from cannrt.graph import CompileOptions, compile_model
from cannrt.graph.lowering import supported_ops

DEVICES = ("CPU", "NPU")
PRECISION = "must_keep_origin_dtype"
REDUCE: tuple[str, ...] = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2")
REDUCE += ("ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# Inputs ONNX passes as tensors that cannrt's lowering needs at compile time (atc needs them
# constant too): a graph input feeding only these positions is bound when the model first runs.
COMPILE_TIME_INPUTS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}), "Slice": frozenset({1, 2, 3, 4}), "Pad": frozenset({1, 2, 3}),
    "Resize": frozenset({1, 2, 3}), "Upsample": frozenset({1}), "Clip": frozenset({1, 2}),
    "Split": frozenset({1}), "Unsqueeze": frozenset({1}), "Squeeze": frozenset({1}), "Expand": frozenset({1}),
    "Tile": frozenset({1}), "ConstantOfShape": frozenset({0}), "Dropout": frozenset({1, 2}),
    "TopK": frozenset({1}), "CumSum": frozenset({1}), "OneHot": frozenset({1, 2}),
    **{op: frozenset({1}) for op in REDUCE},
}  # fmt: skip


class CannrtRep(BackendRep):
    """A compiled, loaded model: run(inputs) -> its outputs in ONNX output order."""

    def __init__(self, model: Model, output_names: Sequence[str]) -> None:
        self.model = model
        self.output_names = list(output_names)
        weakref.finalize(self, _close, model)  # the suite drops reps without closing them

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on a list of arrays (graph input order) or a dict by input name."""
        if isinstance(inputs, Mapping):
            feeds: Any = dict(inputs)
        elif isinstance(inputs, np.ndarray):
            feeds = [inputs]
        else:
            feeds = list(inputs)
        outputs = self.model.run(feeds)
        return namedtupledict("Outputs", self.output_names)(*outputs)


def _close(model: Model) -> None:
    with contextlib.suppress(CannError):  # the runtime may be reset already
        model.close()


def _has_acl_type(elem_type: int) -> bool:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)) in NUMPY_TO_ACL
    except (KeyError, TypeError, ValueError):
        return False


def compile_time_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that feed only positions cannrt needs at compile time (COMPILE_TIME_INPUTS)."""
    initialised = {t.name for t in model.graph.initializer}
    uses: dict[str, list[bool]] = {}
    for node in model.graph.node:
        positions = COMPILE_TIME_INPUTS.get(node.op_type, frozenset())
        for index, name in enumerate(node.input):
            uses.setdefault(name, []).append(index in positions)
    return [i.name for i in model.graph.input if i.name not in initialised and uses.get(i.name) and all(uses[i.name])]


class SpecializingRep(BackendRep):
    """A model with inputs cannrt needs at compile time: compiled when it first runs, with those
    inputs as constants, and again whenever their values change."""

    def __init__(self, model: onnx.ModelProto, bound: Sequence[str], options: Mapping[str, Any]) -> None:
        self.model = model
        self.bound = list(bound)
        self.options = dict(options)
        initialised = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initialised]
        self._reps: dict[bytes, CannrtRep] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Compile for the values of the bound inputs (once per distinct values) and run."""
        if isinstance(inputs, Mapping):
            feeds = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {n: np.asarray(a) for n, a in zip(self.input_names, arrays, strict=True)}
        fixed = {name: feeds.pop(name) for name in self.bound}
        key = b"".join(
            f"{n}:{a.dtype}:{a.shape}:".encode() + np.ascontiguousarray(a).tobytes() for n, a in fixed.items()
        )
        rep = self._reps.get(key)
        if rep is None:
            specialised = onnx.ModelProto()
            specialised.CopyFrom(self.model)
            graph = specialised.graph
            graph.initializer.extend(numpy_helper.from_array(a, n) for n, a in fixed.items())
            if specialised.ir_version >= 4:  # an IR-3 model keeps its initialisers among the inputs
                kept = [i for i in graph.input if i.name not in fixed]
                del graph.input[:]
                graph.input.extend(kept)
            rep = self._reps[key] = CannrtBackend.compile(specialised, self.options)
        return rep.run(feeds)


class CannrtBackend(Backend):
    """onnx.backend.base.Backend over cannrt."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """True if every node's op type has a cannrt lowering and every tensor type a device type
        code in cannrt.dtypes (float8, float4, int4 and int2 included; not strings or complex), on a
        device cannrt serves."""
        known = supported_ops()
        graph = model.graph
        ops_ok = all(node.op_type in known and node.domain in ("", "ai.onnx") for node in graph.node)
        types = [v.type.tensor_type.elem_type for v in (*graph.input, *graph.output, *graph.value_info)]
        types += [t.data_type for t in graph.initializer]
        types += [a.i for n in graph.node if n.op_type in ("Cast", "CastLike") for a in n.attribute if a.name == "to"]
        return cls.supports_device(device) and ops_ok and all(_has_acl_type(t) for t in types if t)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        """Compile and load the model; compile options (CompileOptions fields) may be passed. A
        model with inputs cannrt needs at compile time (a Reshape's shape given as a graph input)
        is compiled when it first runs (SpecializingRep)."""
        if not cls.supports_device(device):
            raise ValueError(f"cannrt runs on {' or '.join(DEVICES)}, not {device!r}")
        options = {"precision_mode": PRECISION, **kwargs}
        bound = compile_time_inputs(model)
        if bound:
            return SpecializingRep(model, bound, options)
        return cls.compile(model, options)

    @staticmethod
    def compile(model: onnx.ModelProto, options: Mapping[str, Any]) -> CannrtRep:
        """Compile and load a model with CompileOptions(**options)."""
        offline = compile_model(model, CompileOptions(**options))
        return CannrtRep(Model(offline), [o.name for o in offline.outputs])

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        """prepare + run once."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on numpy inputs: a one-node model of the inputs' types (outputs inferred,
        or as outputs_info gives them)."""
        opset = int(kwargs.pop("opset_version", onnx.defs.onnx_opset_version()))
        arrays = [np.asarray(a) for a in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise ValueError(f"node {node.name or node.op_type} takes {len(names)} inputs, got {len(arrays)}")
        graph_inputs = [
            onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays, strict=True)
        ]
        if outputs_info:
            graph_outputs = [
                onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)), s)
                for n, (t, s) in zip(node.output, outputs_info, strict=True)
            ]
        else:
            graph_outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = onnx.helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        if not outputs_info:  # the outputs' types from onnx's shape inference
            model = onnx.shape_inference.infer_shapes(model)
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """CPU (the name onnx's suite asks for) and NPU: both mean cannrt's simulated NPU."""
        return str(device).split(":")[0].upper() in DEVICES


is_compatible = CannrtBackend.is_compatible
prepare = CannrtBackend.prepare
run_model = CannrtBackend.run_model
run_node = CannrtBackend.run_node
supports_device = CannrtBackend.supports_device

__all__ = ["CannrtBackend", "CannrtRep", "is_compatible", "prepare", "run_model", "run_node", "supports_device"]
