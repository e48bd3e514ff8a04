"""Model durations of kernels against the measured anchors of REFERENCE.md section 13."""

from __future__ import annotations

import heapq
from typing import NamedTuple

from cannrt.abi import CoreKind, TensorArg
from cannrt.config import ChipSpec, DeviceCosts
from cannrt.kernels.cost import block_cost
from cannrt.kernels.registry import get_kernel


class Anchor(NamedTuple):
    """A published measurement: kernel, its arguments, block_dim and the measured microseconds."""

    label: str
    kernel: str
    args: tuple[TensorArg, ...]
    block_dim: int
    measured_us: float


def _square(n: int, dtype: int) -> tuple[TensorArg, ...]:
    out = 0 if dtype == 0 else dtype
    return (TensorArg(0, dtype, (n, n)), TensorArg(0, dtype, (n, n)), TensorArg(0, out, (n, n)))


def _stream(n: int) -> tuple[TensorArg, ...]:
    return (TensorArg(0, 1, (n,)), TensorArg(0, 1, (n,)))


ANCHORS = (
    Anchor("matmul fp16 1024^3", "matmul", _square(1024, 1), 24, 21.9),
    Anchor("matmul fp16 2048^3", "matmul", _square(2048, 1), 24, 68.4),
    Anchor("matmul fp16 4096^3", "matmul", _square(4096, 1), 24, 437.0),
    Anchor("matmul fp16 8192^3", "matmul", _square(8192, 1), 24, 3600.0),
    Anchor("matmul bf16 4096^3", "matmul", _square(4096, 27), 24, 436.0),
    Anchor("matmul fp32 4096^3", "matmul", _square(4096, 0), 24, 1626.0),
    Anchor("gelu fp16 64M elements (1.25 TB/s)", "gelu", _stream(64 << 20), 48, 2 * 2 * (64 << 20) / 1.25e6),
)


def model_us(anchor: Anchor, chip: ChipSpec | None = None, costs: DeviceCosts | None = None) -> float:
    """The modelled duration of an anchor's kernel on an idle device with a cold L2."""
    chip = chip or ChipSpec()
    costs = costs or DeviceCosts()
    kernel = get_kernel(anchor.kernel)
    work = kernel.work(anchor.args)
    cores = chip.usable_cores(kernel.core_kind == CoreKind.AIVEC)
    heap = [(0.0, core) for core in range(cores)]
    active = min(anchor.block_dim, cores)
    end = 0.0
    for fraction in kernel.block_fractions(work, anchor.block_dim):
        free_at, core = heap[0]
        finish = free_at + block_cost(work, fraction, chip, active, 0.0).total_ns
        finish += costs.block_launch_ns if free_at > 0 else 0
        heapq.heapreplace(heap, (finish, core))
        end = max(end, finish)
    return (costs.dispatch_ns + max(end, costs.kernel_floor_ns)) / 1000.0
