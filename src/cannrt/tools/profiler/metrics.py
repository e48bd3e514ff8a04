"""PMU counters of a kernel task, derived from its record: msprof's aicore_metrics groups.

Every figure is computed from what the cost model charged (`TaskRecord.pipes`, summed over blocks),
the kernel's `Work`, the per-block spans and the chip spec; docs/profiling.md gives the formulas.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from cannrt.abi import CoreKind, TaskRecord, tensor_nbytes
from cannrt.config import ChipSpec
from cannrt.tools.profiler.records import tensors

L1_TO_L0_BYTES_PER_CYCLE = 512  # L0A port 512 B/cycle and L0B 256 B/cycle in parallel, inputs split evenly
L0C_TO_GM_GBPS = 209.0  # per-core FIXPIPE cap, REFERENCE.md section 13
L2_LINE_BYTES = 512  # L2 cache line, REFERENCE.md section 13

PIPES = ("vec", "mac", "scalar", "mte1", "mte2", "mte3", "fixpipe")
GROUPS: dict[str, tuple[str, ...]] = {
    "PipeUtilization": (*(f"{p}_{kind}" for p in PIPES for kind in ("time(us)", "ratio")), "icache_miss_rate"),
    "ArithmeticUtilization": (
        "mac_fp16_ratio",
        "mac_int8_ratio",
        "vec_fp32_ratio",
        "vec_fp16_ratio",
        "vec_int32_ratio",
        "vec_misc_ratio",
        "cube_fops",
        "vector_fops",
    ),
    "Memory": tuple(f"{level}_{way}_bw(GB/s)" for level in ("ub", "l1", "l2", "main_mem") for way in ("read", "write")),
    "L2Cache": ("write_cache_hit", "write_cache_miss_allocate", "read_cache_hit", "read_cache_miss_allocate"),
}


class CoreTime(NamedTuple):
    """msprof's per-task core figures: total_cycles over all blocks and aicore_time(us)."""

    busy_ns: float  # sum over blocks of the time each block held its core
    total_cycles: int
    core_time_us: float  # cycles / freq_MHz / blockDim * ceil(blockDim / core_count)


def check_group(group: str) -> str:
    """The aicore_metrics group name, or ValueError naming the known groups."""
    if group not in GROUPS:
        raise ValueError(f"unknown aicore_metrics {group!r}; known: {', '.join(GROUPS)}")
    return group


_CORE_COUNTS: dict[tuple[int, bool], tuple[ChipSpec, int]] = {}  # (id(chip), vector) -> (chip, count)
_last: list[tuple[TaskRecord, ChipSpec, CoreTime, dict[str, float]] | None] = [None]  # the last record's figures


def core_count(record: TaskRecord, chip: ChipSpec) -> int:
    """Enabled cores of the kind the kernel runs on (vector cores, or AI cores)."""
    vector = record.core_kind == CoreKind.AIVEC
    known = _CORE_COUNTS.get((id(chip), vector))
    if known is None or known[0] is not chip:
        known = _CORE_COUNTS[(id(chip), vector)] = (chip, chip.usable_cores(vector))
    return known[1]


def _figures(record: TaskRecord, chip: ChipSpec) -> tuple[CoreTime, dict[str, float]]:
    """core_time and pipe_ratios of a record, computed once for the record last asked about (every
    view of one task asks in a row)."""
    last = _last[0]
    if last is not None and last[0] is record and last[1] is chip:
        return last[2], last[3]
    timing = _core_time(record, chip)
    busy = timing.busy_ns
    ratios = {p: (min(1.0, ns / busy) if busy > 0 else 0.0) for p, ns in pipe_busy_ns(record, chip).items()}
    _last[0] = (record, chip, timing, ratios)
    return timing, ratios


def core_time(record: TaskRecord, chip: ChipSpec) -> CoreTime:
    """total_cycles and aicore_time(us) (aiv_time(us) for vector-core kernels) of a kernel."""
    return _figures(record, chip)[0]


def _core_time(record: TaskRecord, chip: ChipSpec) -> CoreTime:
    if record.blocks:
        busy = float(sum(end - start for _, start, end in record.blocks))
    else:
        busy = record.pipes.total_ns if record.pipes is not None else 0.0
    cycles = round(busy * chip.clock_mhz / 1000.0)
    block_dim = max(1, record.block_dim)
    waves = math.ceil(block_dim / max(1, core_count(record, chip)))
    return CoreTime(busy, cycles, cycles / chip.clock_mhz / block_dim * waves)


def pipe_busy_ns(record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """Busy ns per pipe, summed over blocks. mte1 and fixpipe are derived for kernels with cube work:
    mte1 = bytes entering L1 / 512 B per cycle; fixpipe = bytes written / 209 GB/s (L0C -> GM)."""
    pipes, work = record.pipes, record.work
    if pipes is None:
        return dict.fromkeys(PIPES, 0.0)
    cube = work is not None and work.cube_flops > 0
    in_bytes = (work.bytes_read + work.l2_bytes_read) if work is not None else 0
    out_bytes = work.bytes_written if work is not None else 0
    ghz = chip.clock_mhz / 1000.0
    return {
        "vec": pipes.vector_ns,
        "mac": pipes.cube_ns,
        "scalar": pipes.scalar_ns,
        "mte1": in_bytes / (L1_TO_L0_BYTES_PER_CYCLE * ghz) if cube else 0.0,
        "mte2": pipes.mte2_ns,
        "mte3": pipes.mte3_ns,
        "fixpipe": out_bytes / L0C_TO_GM_GBPS if cube else 0.0,
    }


def pipe_ratios(record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """`<pipe>_ratio` = busy cycles of the pipe / total cycles (capped at 1)."""
    return dict(_figures(record, chip)[1])


def pipe_utilization(record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """PipeUtilization: `<pipe>_ratio`, `<pipe>_time(us)` = ratio x aicore_time, icache_miss_rate (0:
    the model has no instruction cache)."""
    time_us = core_time(record, chip).core_time_us
    values: dict[str, float] = {}
    for pipe, ratio in pipe_ratios(record, chip).items():
        values[f"{pipe}_time(us)"] = ratio * time_us
        values[f"{pipe}_ratio"] = ratio
    values["icache_miss_rate"] = 0.0
    return values


def arithmetic_utilization(record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """ArithmeticUtilization: the mac / vec ratios split by data type (cube_rate 2 = int8, vector_rate
    2 = fp16), and the floating-point operation counts."""
    ratios = pipe_ratios(record, chip)
    work = record.work
    int8 = work is not None and work.cube_rate >= 2
    fp16_vec = work is not None and work.vector_rate >= 2
    return {
        "mac_fp16_ratio": 0.0 if int8 else ratios["mac"],
        "mac_int8_ratio": ratios["mac"] if int8 else 0.0,
        "vec_fp32_ratio": 0.0 if fp16_vec else ratios["vec"],
        "vec_fp16_ratio": ratios["vec"] if fp16_vec else 0.0,
        "vec_int32_ratio": 0.0,
        "vec_misc_ratio": 0.0,
        "cube_fops": work.cube_flops if work is not None else 0.0,
        "vector_fops": work.vector_ops if work is not None else 0.0,
    }


class Traffic(NamedTuple):
    """Bytes a kernel moved at each level of the memory hierarchy."""

    ub_read: float
    ub_write: float
    l1_read: float
    l1_write: float
    l2_read: float
    l2_write: float
    main_mem_read: float
    main_mem_write: float


def traffic(record: TaskRecord) -> Traffic:
    """Bytes per level: inputs come through L2 (hit share) or HBM (the rest), land in L1 (cube kernels,
    then L1 -> L0 via MTE1) or UB (vector kernels); outputs leave UB / L0C through L2 to HBM."""
    work = record.work
    if work is None or record.pipes is None:
        return Traffic(0, 0, 0, 0, 0, 0, 0, 0)
    inputs = float(work.bytes_read + work.l2_bytes_read)
    hit = record.l2_hit
    l2_read = work.bytes_read * hit + work.l2_bytes_read
    hbm_read = work.bytes_read * (1.0 - hit)
    out = float(work.bytes_written)
    if work.cube_flops > 0:
        return Traffic(0.0, 0.0, inputs, inputs, l2_read, out, hbm_read, out)
    return Traffic(out, inputs, 0.0, 0.0, l2_read, out, hbm_read, out)


def memory_bandwidth(record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """Memory: `<level>_<read|write>_bw(GB/s)` = bytes moved / Task Duration (bytes per ns = GB/s)."""
    duration = max(1, record.end_ns - record.start_ns)
    moved = traffic(record)._asdict()
    return {f"{key}_bw(GB/s)": value / duration for key, value in moved.items()}


def l2_requests(record: TaskRecord) -> dict[str, float]:
    """L2Cache: requests in 512-byte lines. Reads hit for the resident share (`l2_hit`) and for L2
    re-reads; a write hits when it lands on one of the kernel's own inputs (in place), else it
    allocates on miss."""
    work = record.work
    if work is None or record.pipes is None:
        return dict.fromkeys(GROUPS["L2Cache"], 0.0)
    inputs = set(tensors(record, False))
    in_place = sum(tensor_nbytes(arg) for arg in tensors(record, True) if arg in inputs)
    written = work.bytes_written
    hits = min(written, in_place)
    return {
        "write_cache_hit": float(math.ceil(hits / L2_LINE_BYTES)),
        "write_cache_miss_allocate": float(math.ceil((written - hits) / L2_LINE_BYTES)),
        "read_cache_hit": float(round((work.bytes_read * record.l2_hit + work.l2_bytes_read) / L2_LINE_BYTES)),
        "read_cache_miss_allocate": float(round(work.bytes_read * (1.0 - record.l2_hit) / L2_LINE_BYTES)),
    }


def l2_hit_rate(record: TaskRecord) -> float:
    """l2_cache `Hit Rate` = hits / (hits + misses) over read and write requests."""
    counts = l2_requests(record)
    hits = counts["read_cache_hit"] + counts["write_cache_hit"]
    total = hits + counts["read_cache_miss_allocate"] + counts["write_cache_miss_allocate"]
    return hits / total if total else 0.0


def group_values(group: str, record: TaskRecord, chip: ChipSpec) -> dict[str, float]:
    """The metric values of one aicore_metrics group for a kernel task."""
    check_group(group)
    if group == "PipeUtilization":
        return pipe_utilization(record, chip)
    if group == "ArithmeticUtilization":
        return arithmetic_utilization(record, chip)
    if group == "Memory":
        return memory_bandwidth(record, chip)
    return l2_requests(record)


def memory_bound(record: TaskRecord, chip: ChipSpec) -> float:
    """msprof's memory_bound = mte2_ratio / max(mac_ratio, vec_ratio) (> 1 means memory bound)."""
    ratios = pipe_ratios(record, chip)
    compute = max(ratios["mac"], ratios["vec"])
    return ratios["mte2"] / compute if compute > 0 else 0.0
