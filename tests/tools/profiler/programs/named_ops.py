"""A Python program using cannrt: named launches (graph-node names) of matmul and gelu."""

from __future__ import annotations

import numpy as np

import cannrt

device = cannrt.Device(0)
stream = device.stream()
x = device.array(np.ones((256, 256), np.float16))
y = device.empty((256, 256), np.float32)
for layer in range(3):
    stream.launch("matmul", x, x, y, block_dim=8, name=f"layer{layer}/MatMul")
    stream.launch("gelu", y, y, block_dim=16, name=f"layer{layer}/Gelu")
stream.synchronize()
print("sum", float(y.to_numpy(stream).sum()))
