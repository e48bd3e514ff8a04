"""Roofline cost of one block of a kernel on one core (docs/timing.md has the formulas).

Each pipe is charged its own busy time; the block takes as long as its slowest pipe, because
the cube, vector and MTE pipes overlap on a real AI core.
"""

from __future__ import annotations

from typing import NamedTuple

from cannrt.config import ChipSpec
from cannrt.kernels.registry import Work

CUBE_EFFICIENCY = 0.9  # sustained fraction of peak cube MACs on large tiles
SCALAR_OPS_PER_CYCLE = 1.0


class PipeTimes(NamedTuple):
    """Busy nanoseconds per pipe for one block, and the block's duration."""

    cube_ns: float
    vector_ns: float
    scalar_ns: float
    mte2_ns: float  # GM -> on-chip reads
    mte3_ns: float  # on-chip -> GM writes
    total_ns: float


def core_read_gbps(chip: ChipSpec, active_cores: int, l2_hit: float) -> float:
    """Read bandwidth one core gets: its own cap, or its share of HBM and L2."""
    active = max(1, active_cores)
    hbm_share = chip.hbm_bandwidth_gbps / active
    l2_share = chip.l2_bandwidth_gbps / active
    blended = 1.0 / ((1.0 - l2_hit) / hbm_share + l2_hit / l2_share)
    return min(chip.core_gm_read_gbps, blended)


def core_write_gbps(chip: ChipSpec, active_cores: int) -> float:
    """Write bandwidth one core gets: its own cap or its share of HBM."""
    return min(chip.core_gm_write_gbps, chip.hbm_bandwidth_gbps / max(1, active_cores))


def block_cost(work: Work, fraction: float, chip: ChipSpec, active_cores: int, l2_hit: float) -> PipeTimes:
    """Pipe busy times of a block doing `fraction` of the kernel's work."""
    cycles_per_ns = chip.clock_mhz / 1000.0
    cube_flops_per_ns = 2.0 * chip.cube_macs_per_cycle * cycles_per_ns * CUBE_EFFICIENCY * work.cube_rate
    vector_ops_per_ns = chip.vector_ops_per_cycle * cycles_per_ns * work.vector_rate
    cube_ns = work.cube_flops * fraction / cube_flops_per_ns
    vector_ns = work.vector_ops * fraction / vector_ops_per_ns
    scalar_ns = work.scalar_ops * fraction / (SCALAR_OPS_PER_CYCLE * cycles_per_ns)
    mte2_ns = work.bytes_read * fraction / core_read_gbps(chip, active_cores, l2_hit)
    mte3_ns = work.bytes_written * fraction / core_write_gbps(chip, active_cores)
    total = max(cube_ns, vector_ns, scalar_ns, mte2_ns, mte3_ns) + work.fixed_ns
    return PipeTimes(cube_ns, vector_ns, scalar_ns, mte2_ns, mte3_ns, total)
