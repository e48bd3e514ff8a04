"""The nine models of onnx/backend/test/data/light with seeded random weights (a shared fixture).

The shipped models fill every weight with ConstantOfShape(0.02), so their outputs are degenerate
(every class equally likely). `load(name)` replaces each fill by an initialiser of the same shape
with seeded random values chosen by the weight's role, so activations keep a useful range through
the whole network and the softmax at the end is far from uniform:
Conv / Gemm weights He-normal (scaled by `gain`), biases small normals, BatchNormalization scale
and variance in [0.5, 1.5] (scale in [0.1, 0.3] where a residual branch meets its shortcut, so
activations do not double per block), mean and bias small normals, per-channel Mul in [0.5, 1.5]
and Add small normals; the last layer before the Softmax is scaled so the logits have std 2.
`input_for(model)` gives the seeded input batch; `run_onnxruntime` the reference outputs.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NAMES = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)
SMALL = ("squeezenet", "inception_v1", "resnet50", "shufflenet", "densenet121", "inception_v2")


def path(name: str) -> Path:
    return LIGHT / f"light_{name}.onnx"


def _roles(graph: onnx.GraphProto) -> dict[str, tuple[str, int]]:
    """tensor name -> (consumer op type, input index) of its first consumer."""
    roles: dict[str, tuple[str, int]] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            roles.setdefault(name, (node.op_type, k))
    return roles


def _residual_scales(graph: onnx.GraphProto) -> set[str]:
    """The scale inputs of BatchNormalizations that end a residual branch: their output meets an
    identity shortcut (a tensor no BatchNormalization writes) in a Sum / Add."""
    writer = {out: node for node in graph.node for out in node.output}
    scales = set()
    for node in graph.node:
        if node.op_type not in ("Sum", "Add") or len(node.input) != 2:
            continue
        kinds = [writer.get(name) for name in node.input]
        bns = [w for w in kinds if w is not None and w.op_type == "BatchNormalization"]
        if len(bns) == 1 and all(w is not None for w in kinds):
            scales.add(bns[0].input[1])
    return scales


def _random(shape: tuple[int, ...], role: tuple[str, int], rng: np.random.Generator, gain: float) -> np.ndarray:
    op, k = role
    if role == ("residual", 1):  # zero-init-residual style: the branch adds a little to its shortcut
        return rng.random(shape, dtype=np.float32) * np.float32(0.2) + np.float32(0.1)
    if op in ("Conv", "Gemm") and k == 1 and len(shape) >= 2:
        fan_in = math.prod(shape[1:]) if op == "Conv" else shape[1]
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(gain * math.sqrt(2.0 / max(fan_in, 1)))
    if (op == "BatchNormalization" and k in (1, 4)) or op == "Mul":
        return rng.random(shape, dtype=np.float32) + np.float32(0.5)
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)


HOMOGENEOUS = ("Relu", "GlobalAveragePool", "AveragePool", "MaxPool", "Reshape", "Flatten", "Dropout", "Identity")
LOGIT_STD = 2.0


def _set(graph: onnx.GraphProto, inits: dict[str, np.ndarray], name: str, array: np.ndarray) -> None:
    inits[name] = array
    for init in graph.initializer:
        if init.name == name:
            init.CopyFrom(numpy_helper.from_array(array, name))


def _probe(model: onnx.ModelProto, names: list[str]) -> list[np.ndarray]:
    """The values of `names` on the seeded input."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    return run_onnxruntime(probe, input_for(model))


def _calibrate(model: onnx.ModelProto, inits: dict[str, np.ndarray]) -> None:
    """Scale the last Conv / Gemm before the Softmax so the logits' std is LOGIT_STD (random weights
    through fifty layers otherwise give logits so large that the softmax is one-hot). Relu and the
    pools in between are positively homogeneous, so the logits scale by the same factor."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    softmax = [node for node in graph.node if node.op_type == "Softmax"]
    if not softmax:
        return
    logits = softmax[-1].input[0]
    node = producer.get(logits)
    while node is not None and node.op_type in HOMOGENEOUS:
        node = producer.get(node.input[0])
    if node is None or node.op_type not in ("Conv", "Gemm") or any(n not in inits for n in node.input[1:3]):
        return
    (values,) = _probe(model, [logits])
    factor = np.float32(LOGIT_STD / max(float(np.std(values)), 1e-12))
    for name in node.input[1:3]:
        _set(graph, inits, name, inits[name] * factor)


@functools.cache
def load(name: str, seed: int = 0, gain: float = 1.0) -> onnx.ModelProto:
    """The light model `name` with its ConstantOfShape fills replaced by seeded random weights (one
    object per process and arguments, shared: copy it before changing it)."""
    model = onnx.load(path(name))
    graph = model.graph
    rng = np.random.default_rng(seed)
    roles = _roles(graph)
    residual = _residual_scales(graph)
    inits = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in inits[node.input[0]])
        fill = numpy_helper.to_array(node.attribute[0].t) if node.attribute else np.zeros(1, np.float32)
        out = node.output[0]
        role = ("residual", 1) if out in residual else roles.get(out, ("", 0))
        array = _random(shape, role, rng, gain).astype(fill.dtype)
        inits[out] = array
        graph.initializer.append(numpy_helper.from_array(array, out))
        if model.ir_version < 4:  # an IR-3 model lists its initialisers among the graph inputs
            graph.input.append(
                onnx.helper.make_tensor_value_info(out, onnx.helper.np_dtype_to_tensor_dtype(array.dtype), shape)
            )
    del graph.node[:]
    graph.node.extend(kept)
    _calibrate(model, inits)
    return model


def input_for(model: onnx.ModelProto, seed: int = 1, batch: int | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input that is not an initialiser."""
    inits = {init.name for init in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in model.graph.input:
        if info.name in inits:
            continue
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
        if batch is not None:
            dims[0] = batch
        feeds[info.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs on onnxruntime's CPU provider (the reference)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]
