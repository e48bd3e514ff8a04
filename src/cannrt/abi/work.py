"""What a kernel launch does (Work) and what it costs per pipe (PipeTimes): kernels state the
first, the device's cost model computes the second, the profiler reads both from task records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Work:
    """What one launch of a kernel does, for the cost model (whole kernel, all blocks)."""

    cube_flops: float = 0.0  # 2 x multiply-adds on the cube unit
    cube_rate: float = 1.0  # throughput relative to fp16 (bf16 1, fp32 0.25, int8 2)
    vector_ops: float = 0.0  # element operations on the vector unit
    vector_rate: float = 1.0  # throughput relative to fp32 lanes (fp16 2)
    scalar_ops: float = 0.0
    bytes_read: int = 0  # unique bytes read from global memory (HBM, or L2 when resident)
    bytes_written: int = 0
    l2_bytes_read: int = 0  # re-reads of data already pulled on chip once (served by L2)
    fixed_ns: int = 0  # per-block duration added to the roofline (spin)
    units: int = 1  # indivisible work units the tiling spreads over blocks


class PipeTimes(NamedTuple):
    """Busy nanoseconds per pipe for one block, and the block's duration."""

    cube_ns: float
    vector_ns: float
    scalar_ns: float
    mte2_ns: float  # GM -> on-chip reads through the core's port
    mte3_ns: float  # on-chip -> GM writes through the core's port
    total_ns: float
