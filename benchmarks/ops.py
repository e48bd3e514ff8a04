"""Operator benchmark: Conv, MaxPool and Gemm on resnet50's shapes (and densenet121's main conv),
cannrt against onnxruntime.

Each row is one node lowered by cannrt.graph.lowering and launched on the simulated device
(launch, execute, synchronise: wall time), against the same node in an onnxruntime CPU session
on the same inputs, measured in the same run (best of R interleaved runs each); the ratio is
cannrt / onnxruntime. The modelled device time of the launch is shown beside. cannrt's cube
kernels run the host BLAS on one thread (kernels/nn/blas.py); onnxruntime uses its default
thread count unless --threads says otherwise (--threads 1 compares one thread with one).
Run: python3 benchmarks/ops.py [--repeats R] [--threads T]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime
from onnx import helper
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.graph.lowering import Node, Value, lower

CORES = 24
F32 = np.dtype(np.float32)
# label, op, input shapes (x first), output shape, attributes
CASES: list[tuple[str, str, list[tuple[int, ...]], tuple[int, ...], dict[str, Any]]] = [
    ("conv1 7x7/2 3->64 @224", "Conv", [(1, 3, 224, 224), (64, 3, 7, 7), (64,)], (1, 64, 112, 112),
     {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ("1x1 64->256 @56", "Conv", [(1, 64, 56, 56), (256, 64, 1, 1), (256,)], (1, 256, 56, 56), {}),
    ("1x1 256->64 @56", "Conv", [(1, 256, 56, 56), (64, 256, 1, 1), (64,)], (1, 64, 56, 56), {}),
    ("3x3 64->64 @56", "Conv", [(1, 64, 56, 56), (64, 64, 3, 3), (64,)], (1, 64, 56, 56), {"pads": [1, 1, 1, 1]}),
    ("3x3/2 128->128 @56", "Conv", [(1, 128, 56, 56), (128, 128, 3, 3), (128,)], (1, 128, 28, 28),
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("1x1/2 256->512 @56", "Conv", [(1, 256, 56, 56), (512, 256, 1, 1), (512,)], (1, 512, 28, 28), {"strides": [2, 2]}),
    ("3x3 256->256 @14", "Conv", [(1, 256, 14, 14), (256, 256, 3, 3), (256,)], (1, 256, 14, 14),
     {"pads": [1, 1, 1, 1]}),
    ("3x3 512->512 @7", "Conv", [(1, 512, 7, 7), (512, 512, 3, 3), (512,)], (1, 512, 7, 7), {"pads": [1, 1, 1, 1]}),
    ("3x3 128->32 @56 (densenet)", "Conv", [(1, 128, 56, 56), (32, 128, 3, 3), (32,)], (1, 32, 56, 56),
     {"pads": [1, 1, 1, 1]}),
    ("3x3 128->32 @28 (densenet)", "Conv", [(1, 128, 28, 28), (32, 128, 3, 3), (32,)], (1, 32, 28, 28),
     {"pads": [1, 1, 1, 1]}),
    ("maxpool 3x3/2 64 @112", "MaxPool", [(1, 64, 112, 112)], (1, 64, 56, 56),
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("gemm 1x2048 -> 1000", "Gemm", [(1, 2048), (1000, 2048), (1000,)], (1, 1000), {"transB": 1}),
]  # fmt: skip


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of fn in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def onnxruntime_session(op: str, names: list[str], data: list[np.ndarray], attrs: dict[str, Any], threads: int) -> Any:
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)],
        "bench",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, d.shape) for n, d in zip(names, data, strict=True)],
        [onnx.ValueInfoProto(name="y")],
    )
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    device = cannrt.Device(0)
    stream = device.stream()
    table = Table(title="cannrt operators vs onnxruntime (wall ms, best of runs)")
    for column in ("op", "cannrt ms", "onnxruntime ms", "ratio", "modelled device us", "block_dim"):
        table.add_column(column, justify="right" if column != "op" else "left")
    for label, op, shapes, out_shape, attrs in CASES:
        names = ["x", "w", "b"][: len(shapes)]
        data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        values = {n: Value(n, s, F32) for n, s in zip(names, shapes, strict=True)}
        values["y"] = Value("y", out_shape, F32)
        (step,) = lower(Node(label, op, tuple(names), ("y",), attrs), values, {}, CORES).steps
        arrays = {n: device.array(d) for n, d in zip(names, data, strict=True)}
        arrays["y"] = device.empty(out_shape, F32)
        launch_args = [arrays[a] if isinstance(a, str) else a for a in step.args]
        session = onnxruntime_session(op, names, data, attrs, args.threads)
        feeds = dict(zip(names, data, strict=True))

        def on_device(step: Any = step, launch_args: list[Any] = launch_args) -> None:
            stream.launch(step.kernel, *launch_args, block_dim=step.block_dim)
            stream.synchronize()

        ours, theirs = [], []
        for _ in range(3):  # interleave: the machine's load moves
            ours.append(best_ms(on_device, max(1, args.repeats // 3)))
            theirs.append(
                best_ms(lambda session=session, feeds=feeds: session.run(None, feeds), max(1, args.repeats // 3))
            )
        expected = session.run(None, feeds)[0]
        got = arrays["y"].to_numpy(stream)
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
        start, end = device.event(), device.event()
        start.record(stream)
        stream.launch(step.kernel, *launch_args, block_dim=step.block_dim)
        end.record(stream)
        end.synchronize()
        modelled_us = start.elapsed_ms(end) * 1e3
        mine, ref = min(ours), min(theirs)
        table.add_row(
            label, f"{mine:.3f}", f"{ref:.3f}", f"{mine / ref:.2f}x", f"{modelled_us:.1f}", str(step.block_dim)
        )
        for array in arrays.values():
            array.free()
    Console().print(table)


if __name__ == "__main__":
    main()
