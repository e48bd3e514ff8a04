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
from onnx.backend.base import Backend, BackendRep, namedtupledict

from cannrt.api.model import Model
from cannrt.errors import CannError
from cannrt.graph import CompileOptions, compile_model
from cannrt.graph.lowering import supported_ops

DEVICES = ("CPU", "NPU")
PRECISION = "must_keep_origin_dtype"


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


class CannrtBackend(Backend):
    """onnx.backend.base.Backend over cannrt."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """True if every node's op type has a cannrt lowering (and the device is one cannrt serves)."""
        known = supported_ops()
        return cls.supports_device(device) and all(
            node.op_type in known for node in model.graph.node if node.domain in ("", "ai.onnx")
        )

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> CannrtRep:
        """Compile and load the model; compile options (CompileOptions fields) may be passed."""
        if not cls.supports_device(device):
            raise ValueError(f"cannrt runs on {' or '.join(DEVICES)}, not {device!r}")
        options = CompileOptions(**{"precision_mode": PRECISION, **kwargs})
        offline = compile_model(model, options)
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
