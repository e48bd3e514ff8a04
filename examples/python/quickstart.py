"""Streams, events and kernels with the Pythonic API; checks against numpy."""

from __future__ import annotations

import numpy as np

import cannrt


def main() -> None:
    device = cannrt.Device(0)
    copy, compute = device.stream(), device.stream()
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((256, 256)).astype(np.float16)
    w_host = (rng.standard_normal((256, 256)) / 16).astype(np.float16)

    x = device.empty(x_host.shape, x_host.dtype)
    w = device.array(w_host)
    y = device.empty((256, 256), np.float32)
    x.copy_from(x_host, copy)  # asynchronous on the copy stream
    loaded = copy.record()
    compute.wait(loaded)  # resolved by the device's task scheduler
    start = compute.record()
    compute.launch("matmul", x, w, y, block_dim=24)
    compute.launch("relu", y, y, block_dim=48)
    end = compute.record()

    result = y.to_numpy(compute)
    expected = np.maximum(x_host.astype(np.float32) @ w_host.astype(np.float32), 0)
    assert np.allclose(result, expected, rtol=1e-3, atol=1e-3)
    print(f"matmul + relu: {start.elapsed_ms(end) * 1000:.1f} us on the modelled device")
    print(f"pool: {device.memory_stats()['allocated_bytes.all.current']} bytes allocated")


if __name__ == "__main__":
    main()
