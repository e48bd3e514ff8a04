"""Peer copies between device 0 and device 1: sync and async, from either side, over the peer link."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from cannrt.abi import CopyKind, SqeType
from cannrt.config import ChipSpec, DeviceCosts
from cannrt.runtime import memory_ops

if TYPE_CHECKING:
    from conftest import Npu

PATTERN = (np.arange(1 << 16) * 13 % 256).astype(np.uint8)


@pytest.mark.parametrize("kind", [CopyKind.DEVICE_TO_DEVICE, CopyKind.DEFAULT], ids=lambda k: k.name)
@pytest.mark.parametrize(("src_dev", "dst_dev", "caller"), [(0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1)])
def test_a_synchronous_peer_copy(npu: Npu, src_dev: int, dst_dev: int, caller: int, kind: CopyKind) -> None:
    src = npu.upload(PATTERN, device=src_dev)
    dst = npu.malloc(PATTERN.nbytes, device=dst_dev)
    memory_ops.memcpy(npu.ctx(caller), dst, PATTERN.nbytes, src, PATTERN.nbytes, kind)
    assert npu.read(dst, PATTERN.nbytes, device=dst_dev) == PATTERN.tobytes()
    assert npu.read(src, PATTERN.nbytes, device=src_dev) == PATTERN.tobytes()


@pytest.mark.parametrize(("src_dev", "dst_dev", "caller"), [(0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1)])
def test_an_asynchronous_peer_copy_on_either_devices_stream(npu: Npu, src_dev: int, dst_dev: int, caller: int) -> None:
    src = npu.upload(PATTERN, device=src_dev)
    dst = npu.malloc(PATTERN.nbytes, device=dst_dev)
    ctx = npu.ctx(caller)
    stream = ctx.create_stream()
    memory_ops.memcpy_async(ctx, dst, PATTERN.nbytes, src, PATTERN.nbytes, CopyKind.DEVICE_TO_DEVICE, stream)
    stream.synchronize(timeout_ms=100)
    assert npu.read(dst, PATTERN.nbytes, device=dst_dev) == PATTERN.tobytes()


def test_a_peer_copy_takes_the_peer_link_bandwidth(npu: Npu) -> None:
    size = 5_600_000  # 100 us at 56 GB/s
    src = npu.malloc(size, device=0)
    dst = npu.malloc(size, device=1)
    local = npu.malloc(size, device=0)
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    npu.trace(0)
    memory_ops.memcpy_async(ctx, dst, size, src, size, CopyKind.DEVICE_TO_DEVICE, stream)
    memory_ops.memcpy_async(ctx, local, size, src, size, CopyKind.DEVICE_TO_DEVICE, stream)
    stream.synchronize()
    peer, same = [r for r in npu.records(0) if r.sqe_type == SqeType.SDMA]
    chip, costs = ChipSpec(), DeviceCosts()
    assert peer.end_ns - peer.start_ns == costs.copy_latency_ns + int(size / chip.peer_bandwidth_gbps) == 101_500
    assert same.end_ns - same.start_ns == costs.copy_latency_ns + int(size / (chip.hbm_bandwidth_gbps / 2))
    assert (peer.bytes_read, peer.bytes_written) == (size, size)


def test_a_chain_across_devices_round_trips(npu: Npu) -> None:
    """dev0 -> dev1 -> dev0 on two streams ordered by nothing but synchronisation."""
    first = npu.upload(PATTERN, device=0)
    middle = npu.malloc(PATTERN.nbytes, device=1)
    last = npu.malloc(PATTERN.nbytes, device=0)
    ctx0, ctx1 = npu.ctx(0), npu.ctx(1)
    out, back = ctx0.create_stream(), ctx1.create_stream()
    memory_ops.memcpy_async(ctx0, middle, PATTERN.nbytes, first, PATTERN.nbytes, CopyKind.DEVICE_TO_DEVICE, out)
    out.synchronize(timeout_ms=100)
    memory_ops.memcpy_async(ctx1, last, PATTERN.nbytes, middle, PATTERN.nbytes, CopyKind.DEVICE_TO_DEVICE, back)
    back.synchronize(timeout_ms=100)
    assert npu.read(last, PATTERN.nbytes, device=0) == PATTERN.tobytes()
