"""Device memory a program can watch: the caching pool, a stream-ordered pool, the memory
timeline and cannrt.memory.summary(); a use after free of aclrtMalloc memory faults and names the
freed allocation (inside the caching pool, as in PyTorch's, it goes unnoticed)."""

from __future__ import annotations

import numpy as np

import cannrt
from cannrt.runtime import memory_ops


def main() -> None:
    device = cannrt.Device(0)
    device.set_memory_limit(0.25)  # the caching pool may reserve a quarter of HBM
    copy, compute = device.stream(), device.stream()

    x = device.array(np.linspace(-1, 1, 1 << 16, dtype=np.float32), stream=copy)
    compute.wait(copy.record())
    y = compute.malloc_async(1 << 16, np.float32)  # stream-ordered: usable by compute's work
    compute.launch("relu", x, y, block_dim=8)
    result = y.to_numpy(compute)
    assert np.array_equal(result, np.maximum(np.linspace(-1, 1, 1 << 16, dtype=np.float32), 0))
    address = y.address
    compute.free_async(y)
    again = compute.malloc_async(1 << 16, np.float32)  # the same stream reuses the block at once
    assert again.address == address
    again.free()

    stats = device.memory_stats()
    print(f"caching pool: {stats['allocated_bytes.all.current']} bytes allocated, "
          f"{stats['reserved_bytes.all.current']} reserved (exactly the HBM it holds)")  # fmt: skip
    events = cannrt.memory.history(device)
    print(f"memory timeline: {len(events)} events, last: {events[-1].action} of {abs(events[-1].delta)} bytes")
    cannrt.memory.summary(device, abbreviated=True)

    x.free()
    stale = memory_ops.malloc(device.context, 64)  # aclrtMalloc, then aclrtFree: the VA is quarantined
    memory_ops.free(device.context, stale)
    view = cannrt.DeviceArray(device, stale, (16,), np.dtype(np.float32), owned=False)
    out = device.empty(16, np.float32)
    try:
        compute.launch("relu", view, out)  # reads the freed allocation: a device fault naming it
        compute.synchronize()
    except cannrt.CannError as error:
        assert "inside a freed 96-byte allocation" in str(error)
        print(f"use after free caught: [{error.code}] ...{str(error).split('errorStr: ')[1].splitlines()[0]}")
    else:
        raise AssertionError("a use after free went unnoticed")


if __name__ == "__main__":
    main()
