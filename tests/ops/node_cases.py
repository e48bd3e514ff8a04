"""onnx's backend node tests through lower() + the nn. kernels on the simulated device.

Every case whose nodes are all supported (Constant nodes fold, as the graph engine folds them)
runs node by node: shape inference per node (onnx.shape_inference.infer_node_outputs, with the
values computed so far as its data), lower(), the launches on one stream, the outputs read back.
The case's inputs and every value computed so far count as compile-time constants: a node test
fixes its data, as a graph engine folds what it can. Outputs are compared as onnx's backend
runner compares them (dtype, shape, allclose with the case's rtol / atol, NaN equal to NaN).

`python tests/ops/node_cases.py` prints pass / fail / skip per op.
"""

from __future__ import annotations

import collections
import math
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.backend.test.loader import load_model_tests

import cannrt
from cannrt.dtypes import acl_code
from cannrt.graph.lowering import LoweringError, Node, Value, lower, supported_ops

CORES = 24
FOLD_LIMIT = 4096  # elements: larger values are never shape-like inputs
FOLDED = {"Constant"}


@dataclass(frozen=True)
class Outcome:
    status: str  # "pass", "fail", "skip"
    reason: str = ""


class Skip(Exception):
    """The case needs what the NPU has no type for (strings, fp8, int4, complex ...)."""


def op_of(case: Any) -> str:
    """The op a case tests: its single node's op, or "<op>(expanded)" for a function body."""
    ops = [n.op_type for n in case.model.graph.node if n.op_type not in FOLDED] or ["Constant"]
    return ops[0] if len(ops) == 1 else case.name.removeprefix("test_").split("_")[0] + " (multi-node)"


def selected_cases() -> list[Any]:
    """Node tests whose every node is supported (default domain)."""
    supported = supported_ops() | FOLDED
    chosen = []
    with warnings.catch_warnings():  # generating the cases overflows fp8 casts on purpose
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    for case in cases:
        nodes = case.model.graph.node
        if nodes and all(n.domain in ("", "ai.onnx") and n.op_type in supported for n in nodes):
            chosen.append(case)
    return chosen


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        decoded[attribute.name] = value
    return decoded


def _dtype_ok(dtype: np.dtype) -> np.dtype:
    try:
        acl_code(dtype)
    except ValueError:
        raise Skip(f"dtype {dtype} has no NPU type") from None
    return np.dtype(dtype)


def as_array(data: Any) -> np.ndarray:
    """A data set entry as numpy (cases store either arrays or TensorProtos)."""
    return numpy_helper.to_array(data) if isinstance(data, onnx.TensorProto) else np.asarray(data)


def _value_type(value: Value) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)


class CaseRun:
    """One data set of one case on device 0."""

    def __init__(self, case: Any, inputs: list[np.ndarray]) -> None:
        self.case = case
        graph = case.model.graph
        self.opset = next((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), 18)
        self.imports = list(case.model.opset_import)
        self.known: dict[str, np.ndarray] = {}
        self.values: dict[str, Value] = {}
        self.device = cannrt.Device(0)
        self.stream = self.device.stream()
        self.arrays: dict[str, cannrt.DeviceArray] = {}
        for init in graph.initializer:
            self._place(init.name, numpy_helper.to_array(init))
        feeds = [i.name for i in graph.input if i.name not in self.known]
        for name, data in zip(feeds, inputs, strict=False):
            self._place(name, as_array(data))

    def _place(self, name: str, data: np.ndarray) -> None:
        _dtype_ok(data.dtype)
        self.known[name] = data
        self.values[name] = Value(name, tuple(data.shape), data.dtype)
        self.arrays[name] = self.device.array(np.array(data, order="C"), stream=self.stream)

    def _infer(self, node: onnx.NodeProto, expected: dict[str, np.ndarray]) -> None:
        schema = onnx.defs.get_schema(node.op_type, self.opset, node.domain)
        types = {n: _value_type(self.values[n]) for n in node.input if n}
        data = {
            n: numpy_helper.from_array(self.known[n], n)
            for n in node.input
            if n in self.known and self.known[n].size <= FOLD_LIMIT
        }
        try:
            inferred = shape_inference.infer_node_outputs(schema, node, types, data, opset_imports=self.imports)
        except Exception:
            inferred = {}
        for name in node.output:
            if not name:
                continue
            if name in expected:
                shape, dtype = expected[name].shape, expected[name].dtype
            else:
                tensor = inferred[name].tensor_type
                if not all(d.HasField("dim_value") for d in tensor.shape.dim):
                    raise AssertionError(f"no static shape for {name}")
                shape = tuple(d.dim_value for d in tensor.shape.dim)
                dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            self.values[name] = Value(name, tuple(shape), _dtype_ok(np.dtype(dtype)))
            self.arrays[name] = self.device.empty(tuple(shape), dtype)

    def run(self, expected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for index, node in enumerate(self.case.model.graph.node):
            if node.op_type == "Constant":
                (name,) = node.output
                attribute = node.attribute[0]
                value = helper.get_attribute_value(attribute)
                array = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)
                if attribute.name in ("value_float", "value_int") or attribute.name.endswith("s"):
                    array = array.astype(np.float32 if "float" in attribute.name else np.int64)
                self._place(name, array)
                continue
            self._infer(node, expected)
            lowered = lower(
                Node(
                    node.name or f"n{index}",
                    node.op_type,
                    tuple(node.input),
                    tuple(node.output),
                    _attrs(node),
                    self.opset,
                ),
                self.values,
                self.known,
                CORES,
            )
            for value in lowered.scratch:
                self.arrays[value.name] = self.device.empty(value.shape, value.dtype)
            for step in lowered.steps:
                args = [self.arrays[a] if isinstance(a, str) else a for a in step.args]
                self.stream.launch(step.kernel, *args, block_dim=step.block_dim, name=node.name)
            for name in node.output:  # small results may be later nodes' compile-time inputs
                if name and math.prod(self.values[name].shape) <= FOLD_LIMIT:
                    self.known[name] = self.arrays[name].to_numpy(self.stream)
        result = {name: self.arrays[name].to_numpy(self.stream) for name in expected}
        self.stream.synchronize()
        return result

    def close(self) -> None:
        for array in self.arrays.values():
            array.free()
        self.stream.destroy()


def compare(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> str:
    """Empty when got matches expected as onnx's backend runner requires, else why not."""
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if expected.shape != got.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind in "fc" or expected.dtype.name.startswith(("bfloat16", "float8", "float4")):
        e, g = expected.astype(np.float64), got.astype(np.float64)
        close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            worst = np.nanmax(np.abs(np.where(close, 0, g - e)))
            return f"{int((~close).sum())} of {close.size} elements differ (largest {worst:.3g})"
        return ""
    return "" if np.array_equal(expected, got) else "values differ"


def _fault(message: str) -> str:
    """The kernel's own exception out of a device error report (its errorStr), else the start."""
    start = message.find("errorStr: ")
    first = message[start + len("errorStr: ") :] if start >= 0 else message
    return first.split("\n", 1)[0][:300]


def run_case(case: Any) -> Outcome:
    """Run every data set of a case; the first failure decides."""
    graph = case.model.graph
    for inputs, outputs in case.data_sets:
        expected = {o.name: as_array(v) for o, v in zip(graph.output, outputs, strict=False)}
        run = None
        try:
            run = CaseRun(case, inputs)
            got = run.run(expected)
        except Skip as skip:
            return Outcome("skip", str(skip))
        except cannrt.CannError as exc:  # a device fault is sticky: start the device afresh
            run = None
            cannrt.Device(0).reset()
            return Outcome("fail", f"CannError: {_fault(str(exc))}")
        except (LoweringError, AssertionError, KeyError, ValueError) as exc:
            return Outcome("fail", f"{type(exc).__name__}: {exc}"[:300])
        finally:
            if run is not None:
                run.close()
        for name, value in expected.items():
            why = compare(value, got[name], case.rtol, case.atol)
            if why:
                return Outcome("fail", f"{name}: {why}")
    return Outcome("pass")


def table(outcomes: dict[str, tuple[str, Outcome]]) -> Iterator[str]:
    """Per-op pass / fail / skip rows and the total."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for op, outcome in outcomes.values():
        counts[op][outcome.status] += 1
    yield f"{'op':32} {'pass':>5} {'fail':>5} {'skip':>5}"
    for op in sorted(counts):
        c = counts[op]
        yield f"{op:32} {c['pass']:5} {c['fail']:5} {c['skip']:5}"
    total = collections.Counter(o.status for _, o in outcomes.values())
    ran = total["pass"] + total["fail"]
    share = 100 * total["pass"] / max(1, ran)
    yield f"{'total':32} {total['pass']:5} {total['fail']:5} {total['skip']:5}  ({share:.1f} % of those run)"


if __name__ == "__main__":
    cannrt.reset_runtime()
    results = {case.name: (op_of(case), run_case(case)) for case in selected_cases()}
    print("\n".join(table(results)))
    if "-v" in sys.argv:
        for name, (_, outcome) in sorted(results.items()):
            if outcome.status != "pass":
                print(f"{outcome.status} {name}: {outcome.reason}")
