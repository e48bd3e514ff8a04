"""Checks of a compiled model used by several test files: the memory plan and the task list.

- `check_plan`: planned feature maps that share bytes have disjoint [first, last] task intervals,
  every buffer lies inside the work section, the feature maps stay within 1 % of their lower bound
  and never above their unplanned sum, and the I/O blocks come after the feature maps.
- `check_races`: from the task list alone (stream order + event record / wait), every two kernel
  or copy tasks that touch overlapping bytes of the work section, one of them writing, are ordered.
- `graph_to_onnx`: a rewritten Graph back as an ONNX model (fused activations as their own nodes),
  so onnxruntime can check that the passes kept the function.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from om_interpreter import happens_before, ordered
from onnx import helper, numpy_helper

from cannrt.dtypes import numpy_dtype
from cannrt.graph import Graph
from cannrt.graph.onnx_proto import onnx_elem_type
from cannrt.kernels import get_kernel
from cannrt.om import KernelTask, MemcpyTask, OfflineModel, Section, TensorRef


def check_plan(model: OfflineModel, gear: int = 0, slack: float = 0.01) -> None:
    g = model.gears[gear]
    io = {io.name for io in (*model.inputs, *model.outputs)}
    fm = [p for p in g.plan if p.name not in io]
    assert g.feature_map_size <= g.feature_map_unplanned
    assert g.feature_map_size <= math.ceil(g.feature_map_lower_bound * (1 + slack))
    assert g.feature_map_size == max((p.offset + p.size for p in fm), default=0)
    for p in fm:
        assert p.offset % 512 == 0 and p.offset + p.size <= g.feature_map_size, p
        assert p.first <= p.last, p
    blocks = [p for p in g.plan if p.name in io]
    assert all(b.offset >= g.feature_map_size for b in blocks)
    assert g.work_size == max((b.offset + b.size for b in g.plan), default=0)
    fm.sort(key=lambda p: p.offset)
    for i, a in enumerate(fm):
        for b in fm[i + 1 :]:
            if b.offset >= a.offset + a.size:
                break
            assert a.last < b.first or b.last < a.first, f"{a} and {b} share bytes while both live"


def _accesses(task: Any) -> list[tuple[int, int, bool]]:
    """(start, end, writes) of the work-section bytes a task touches."""
    found = []
    if isinstance(task, KernelTask):
        written = set(get_kernel(task.kernel).outputs)
        for k, arg in enumerate(task.args):
            if isinstance(arg, TensorRef) and arg.section == Section.WORK:
                size = math.prod(arg.shape) * numpy_dtype(arg.dtype).itemsize
                found.append((arg.offset, arg.offset + size, k in written))
    elif isinstance(task, MemcpyTask):
        for ref, writes in ((task.src, False), (task.dst, True)):
            if ref.section == Section.WORK:
                found.append((ref.offset, ref.offset + task.nbytes, writes))
    return found


def check_races(model: OfflineModel, gear: int = 0) -> int:
    """The number of cross-stream pairs of conflicting accesses checked (all ordered, or it fails)."""
    tasks = model.gears[gear].tasks
    clocks = happens_before(tasks, model.num_streams)
    touched = [(t, _accesses(task)) for t, task in enumerate(tasks)]
    touched = [(t, acc) for t, acc in touched if acc]
    checked = 0
    for i, (t1, acc1) in enumerate(touched):
        for t2, acc2 in touched[i + 1 :]:
            if tasks[t1].stream == tasks[t2].stream:
                continue
            if any(s1 < e2 and s2 < e1 and (w1 or w2) for s1, e1, w1 in acc1 for s2, e2, w2 in acc2):
                checked += 1
                assert ordered(clocks, tasks, t1, t2), f"tasks {t1} and {t2} race on work bytes"
    return checked


def _attr(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def graph_to_onnx(graph: Graph) -> onnx.ModelProto:
    """The graph as an ONNX model of its opset (a fused activation becomes the node after its op)."""
    nodes, extra = [], []
    for node in graph.nodes:
        attrs = {k: _attr(v) for k, v in node.attrs.items() if k != "activation"}
        fused = node.attrs.get("activation")
        outputs = list(node.outputs)
        if fused is not None:
            inner = f"{outputs[0]}::before_{fused[0]}"
            outputs[0] = inner
        nodes.append(helper.make_node(node.op_type, list(node.inputs), outputs, name=node.name, **attrs))
        if fused is not None:
            op_type, act_attrs = fused
            act_inputs, act_attrs = [inner], dict(act_attrs)
            dtype = graph.values[node.outputs[0]].dtype
            if op_type == "Clip" and graph.opset >= 11:
                for key in ("min", "max"):
                    value, name = act_attrs.pop(key, None), f"{node.name}::{key}"
                    act_inputs.append(name if value is not None else "")
                    if value is not None:
                        extra.append(numpy_helper.from_array(np.array(value, dtype), name))
            act = helper.make_node(op_type, act_inputs, [node.outputs[0]], name=f"{node.name}::act", **act_attrs)
            nodes.append(act)
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in graph.constants.items()] + extra

    def info(name: str) -> onnx.ValueInfoProto:
        value = graph.values[name]
        return helper.make_tensor_value_info(name, onnx_elem_type(value.dtype), value.shape)

    g = helper.make_graph(nodes, graph.name, [info(n) for n in graph.inputs], [info(n) for n in graph.outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", graph.opset)], ir_version=8)
