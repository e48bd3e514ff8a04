"""Run lowered ONNX nodes on the simulated device: lower() each node, allocate every value,
launch the steps on one stream and read the outputs back (the harness the op tests share)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

import cannrt
from cannrt.graph.lowering import Lowered, Node, Value, lower

CORES = 24


def run_nodes(
    nodes: Sequence[Node],
    values: Mapping[str, Value],
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    constants: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Lower nodes (in order) and execute them on device 0; the outputs as numpy arrays."""
    lowered: list[Lowered] = [lower(node, values, constants or {}, CORES) for node in nodes]
    device = cannrt.Device(0)
    stream = device.stream()
    arrays: dict[str, cannrt.DeviceArray] = {}
    for name, data in inputs.items():
        arrays[name] = device.array(np.array(data, order="C"), stream=stream)
    for plan in lowered:
        for value in plan.scratch:
            arrays[value.name] = device.empty(value.shape, value.dtype)
    for value in values.values():
        if value.name not in arrays:
            arrays[value.name] = device.empty(value.shape, value.dtype)
    for node, plan in zip(nodes, lowered, strict=True):
        for step in plan.steps:
            args = [arrays[a] if isinstance(a, str) else a for a in step.args]
            stream.launch(step.kernel, *args, block_dim=step.block_dim, name=node.name)
    result = {name: arrays[name].to_numpy(stream) for name in outputs}
    stream.synchronize()
    return result
