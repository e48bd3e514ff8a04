"""Offline models built by hand from the built-in kernels (matmul, add, relu), as the graph
engine would write them: weights from offset 512 rounded to 512 bytes, feature maps in a work
section, I/O zero-copy through Section.INPUT / OUTPUT references."""

from __future__ import annotations

import numpy as np

from cannrt.om.model import (
    EventRecordTask,
    EventWaitTask,
    Gear,
    IoDesc,
    KernelTask,
    MemcpyTask,
    OfflineModel,
    PlannedTensor,
    Section,
    TensorRef,
)

F32 = 0  # ACL_FLOAT
NCHW, ND = 0, 2
M, K, N = 4, 8, 16


def pack_weights(*arrays: np.ndarray) -> tuple[bytes, list[int]]:
    """The weight section: each array from offset 512 on, rounded up to 512 bytes."""
    blob, offsets, offset = bytearray(512), [], 512
    for array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        offsets.append(offset)
        padded = -(-len(data) // 512) * 512
        blob += data + bytes(padded - len(data))
        offset += padded
    return bytes(blob), offsets


def weights(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """W (K, N) and b (M, N) of the dense model."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((K, N)).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the dense model computes: relu(x @ W + b) and relu(x @ W)."""
    t = x @ w
    return np.maximum(t + b, 0), np.maximum(t, 0)


def dense_model(streams: int = 1, seed: int = 0, name: str = "dense") -> OfflineModel:
    """y0 = relu(x @ W + b); y1 = relu(x @ W). With streams=2 the second relu runs on stream 1
    after an event from the matmul's stream."""
    w, b = weights(seed)
    blob, (w_at, b_at) = pack_weights(w, b)
    x = TensorRef(Section.INPUT, 0, F32, (M, K), 0)
    wr = TensorRef(Section.WEIGHT, w_at, F32, (K, N))
    br = TensorRef(Section.WEIGHT, b_at, F32, (M, N))
    t = TensorRef(Section.WORK, 0, F32, (M, N))
    u = TensorRef(Section.WORK, 512, F32, (M, N))
    y0 = TensorRef(Section.OUTPUT, 0, F32, (M, N), 0)
    y1 = TensorRef(Section.OUTPUT, 0, F32, (M, N), 1)
    side = 1 if streams > 1 else 0
    tasks: list[object] = [KernelTask(0, "matmul", 1, (x, wr, t), "MatMul_0", "MatMul")]
    if side:
        tasks += [EventRecordTask(0, 0), EventWaitTask(1, 0)]
    tasks += [
        KernelTask(side, "relu", 1, (t, y1), "Relu_2", "Relu"),
        KernelTask(0, "add", 1, (t, br, u), "Add_1", "Add"),
        KernelTask(0, "relu", 1, (u, y0), "Relu_3", "Relu"),
    ]
    if side:  # the add overwrites nothing the side relu reads, but t must outlive it: join back
        tasks += [EventRecordTask(1, 1), EventWaitTask(0, 1)]
    plan = (PlannedTensor("t", 0, 256, 0, 2, 0), PlannedTensor("u", 512, 256, 2, 3, 0))
    gear = Gear(0, ((M, K),), ((M, N), (M, N)), tuple(tasks), plan, 1024)  # type: ignore[arg-type]
    io = IoDesc("x", F32, ND, (M, K), M * K * 4)
    outs = (IoDesc("y0", F32, ND, (M, N), M * N * 4), IoDesc("y1", F32, ND, (M, N), M * N * 4))
    return OfflineModel(name, "Ascend910B1", (io,), outs, blob, streams, 2 if side else 0, (gear,))


def dynamic_batch_model(batches: tuple[int, ...] = (1, 2, 4)) -> OfflineModel:
    """y = relu(x) with x of shape (-1, 8): one gear per batch and the mbatch input last."""
    gears = []
    for batch in batches:
        x = TensorRef(Section.INPUT, 0, F32, (batch, 8), 0)
        y = TensorRef(Section.OUTPUT, 0, F32, (batch, 8), 0)
        tasks = (KernelTask(0, "relu", 1, (x, y), "Relu_0", "Relu"),)
        gears.append(Gear(batch, ((batch, 8), (1,)), ((batch, 8),), tasks, (), 0))
    top = max(batches)
    inputs = (IoDesc("x", F32, ND, (-1, 8), top * 32), IoDesc("ascend_mbatch_shape_data", 9, ND, (1,), 8))
    outputs = (IoDesc("y", F32, ND, (-1, 8), top * 32),)
    return OfflineModel("dyn", "Ascend910B1", inputs, outputs, b"", 1, 0, tuple(gears))


def copy_model() -> OfflineModel:
    """y = W (a weight copied to the output by a MEMCPY task)."""
    w = np.arange(16, dtype=np.float32)
    blob, (w_at,) = pack_weights(w)
    src = TensorRef(Section.WEIGHT, w_at, F32, (16,))
    dst = TensorRef(Section.OUTPUT, 0, F32, (16,), 0)
    gear = Gear(0, (), ((16,),), (MemcpyTask(0, src, dst, 64, "Constant_0"),), (), 0)
    return OfflineModel("copy", "Ascend910B1", (), (IoDesc("y", F32, ND, (16,), 64),), blob, 1, 0, (gear,))
