"""Roofline cost of one block of a kernel on one core (docs/timing.md has the formulas).

Each pipe is charged its own busy time; the block takes as long as its slowest pipe or the
share of HBM / L2 bandwidth it needs, because the cube, vector and MTE pipes overlap on a core.
"""

from __future__ import annotations

from cannrt.abi import PipeTimes, Work
from cannrt.config import ChipSpec

CUBE_EFFICIENCY = 0.9  # sustained fraction of peak cube MACs on large tiles
SCALAR_OPS_PER_CYCLE = 1.0


def block_cost(work: Work, fraction: float, chip: ChipSpec, active_cores: int, l2_hit: float) -> PipeTimes:
    """Pipe busy times of a block doing `fraction` of the kernel's work on one of active_cores."""
    cycles_per_ns = chip.clock_mhz / 1000.0
    active = max(1, active_cores)
    cube_flops_per_ns = 2.0 * chip.cube_macs_per_cycle * cycles_per_ns * CUBE_EFFICIENCY * work.cube_rate
    vector_ops_per_ns = chip.vector_ops_per_cycle * cycles_per_ns * work.vector_rate
    cube_ns = work.cube_flops * fraction / cube_flops_per_ns
    vector_ns = work.vector_ops * fraction / vector_ops_per_ns
    scalar_ns = work.scalar_ops * fraction / (SCALAR_OPS_PER_CYCLE * cycles_per_ns)
    read = (work.bytes_read + work.l2_bytes_read) * fraction
    written = work.bytes_written * fraction
    mte2_ns = read / chip.core_l1_read_gbps
    mte3_ns = written / chip.core_gm_write_gbps
    hbm_bytes = work.bytes_read * fraction * (1.0 - l2_hit) + written
    l2_bytes = work.bytes_read * fraction * l2_hit + work.l2_bytes_read * fraction
    hbm_ns = hbm_bytes / (chip.hbm_bandwidth_gbps * chip.hbm_efficiency / active)
    l2_ns = l2_bytes / (chip.l2_bandwidth_gbps / active)
    total = max(cube_ns, vector_ns, scalar_ns, mte2_ns, mte3_ns, hbm_ns, l2_ns) + work.fixed_ns
    return PipeTimes(cube_ns, vector_ns, scalar_ns, max(mte2_ns, hbm_ns if read else 0.0), mte3_ns, total)
