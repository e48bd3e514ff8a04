"""Host API records: each traced call appears once, under its ACL name."""

from __future__ import annotations

import numpy as np

import cannrt
from cannrt.abi import CopyKind
from cannrt.runtime import memory_ops as mo


def test_one_synchronous_copy_is_one_aclrtmemcpy_record() -> None:
    runtime = cannrt.reset_runtime()
    try:
        ctx = runtime.set_device(0)
        device = mo.malloc(ctx, 4096)
        host = np.zeros(1024, np.float32)
        runtime.api_records = []
        mo.memcpy(ctx, device, 4096, host.ctypes.data, 4096, CopyKind.HOST_TO_DEVICE)
        mo.memset(ctx, device, 4096, 0, 4096)
        names = [record.name for record in runtime.api_records]
        runtime.api_records = None
        assert names == ["aclrtMemcpy", "aclrtMemset"]
    finally:
        runtime.close()
