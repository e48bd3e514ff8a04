"""op_summary, task_time, l2_cache and api_statistic: columns and formulas (REFERENCE.md section 8)."""

from __future__ import annotations

import math

import pytest
from profiler_records import FP32, kernel_record, other_record, tensor

from cannrt.abi import CoreKind, PipeTimes, SqeType, Work
from cannrt.config import ChipSpec, HostCosts
from cannrt.tools import profiler
from cannrt.tools.profiler import metrics, summary
from cannrt.tools.profiler.records import HostSlice

CHIP = ChipSpec()  # 910B1: 1850 MHz, 24 AI cores, 48 vector cores


def row_of(records: list, group: str = "PipeUtilization", index: int = 0) -> dict[str, str]:
    head, rows = profiler.op_summary(records, CHIP, group)
    return dict(zip(head, rows[index], strict=True))


def test_op_summary_starts_with_the_msprof_columns_then_aic_and_aiv_pmu_columns() -> None:
    head = profiler.op_summary_head()
    assert head[:12] == [
        "Device_id",
        "Model ID",
        "Task ID",
        "Stream ID",
        "Op Name",
        "OP Type",
        "OP State",
        "Task Type",
        "Task Start Time(us)",
        "Task Duration(us)",
        "Task Wait Time(us)",
        "Block Num",
    ]
    for column in (
        "Input Shapes",
        "Input Data Types",
        "Input Formats",
        "Output Shapes",
        "Output Data Types",
        "Output Formats",
        "aicore_time(us)",
        "aiv_time(us)",
        "total_cycles",
    ):
        assert column in head
    for pmu in ("vec", "mac", "scalar", "mte1", "mte2", "mte3", "fixpipe"):
        assert {f"aic_{pmu}_ratio", f"aic_{pmu}_time(us)", f"aiv_{pmu}_ratio", f"aiv_{pmu}_time(us)"} <= set(head)
    assert "aic_icache_miss_rate" in head


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        (
            "ArithmeticUtilization",
            {
                "mac_fp16_ratio",
                "mac_int8_ratio",
                "vec_fp32_ratio",
                "vec_fp16_ratio",
                "vec_int32_ratio",
                "vec_misc_ratio",
                "cube_fops",
                "vector_fops",
            },
        ),
        (
            "Memory",
            {f"{level}_{way}_bw(GB/s)" for level in ("ub", "l1", "l2", "main_mem") for way in ("read", "write")},
        ),
        ("L2Cache", {"write_cache_hit", "write_cache_miss_allocate", "read_cache_hit", "read_cache_miss_allocate"}),
    ],
)
def test_each_metrics_group_gives_its_pmu_columns(group: str, expected: set[str]) -> None:
    head = profiler.op_summary_head(group)
    assert {c[4:] for c in head if c.startswith("aic_")} == expected
    assert len(row_of([kernel_record()], group)) == len(head)


def test_an_unknown_metrics_group_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="PipeUtilization"):
        profiler.op_summary_head("Bogus")


def test_cycles_aicore_time_and_pipe_ratios_follow_the_msprof_formulas() -> None:
    # two blocks of 1000 ns: 2000 busy ns = 3700 cycles at 1850 MHz; aicore_time = 3700/1850/2*1 = 1 us
    row = row_of([kernel_record()])
    assert row["total_cycles"] == "3700"
    assert row["aicore_time(us)"] == "1.000" and row["aiv_time(us)"] == "N/A"
    expected = {
        "mac": 1.0,
        "scalar": 0.05,
        "mte2": 0.5,
        "mte3": 0.25,
        "vec": 0.0,
        "mte1": 0.05,  # 185*512 bytes into L1 at 512 B/cycle = 185 cycles = 100 ns of 2000
        "fixpipe": 0.2,
    }  # 209*400 bytes at 209 GB/s = 400 ns of 2000
    for pipe, ratio in expected.items():
        assert float(row[f"aic_{pipe}_ratio"]) == pytest.approx(ratio)
        assert float(row[f"aic_{pipe}_time(us)"]) == pytest.approx(ratio * 1.0, abs=1e-6)
    assert row["aiv_mac_ratio"] == "N/A"


def test_aicore_time_counts_waves_when_blocks_outnumber_cores() -> None:
    blocks = tuple((b % 24, 0, 1000) for b in range(48))  # 48 blocks of 1000 ns on 24 cores: 2 waves
    record = kernel_record(blocks=blocks, pipes=PipeTimes(48000.0, 0, 0, 0, 0, 48000.0))
    timing = metrics.core_time(record, CHIP)
    assert timing.total_cycles == round(48000 * 1.85)
    assert timing.core_time_us == pytest.approx(timing.total_cycles / 1850 / 48 * 2)


def test_a_vector_core_kernel_fills_the_aiv_columns() -> None:
    work = Work(vector_ops=1e6, vector_rate=2, bytes_read=4096, bytes_written=4096)
    record = kernel_record(core_kind=CoreKind.AIVEC, work=work, pipes=PipeTimes(0, 1500.0, 0, 2000.0, 400.0, 2000.0))
    row = row_of([record])
    assert row["Task Type"] == "AI_VECTOR_CORE" and row["aicore_time(us)"] == "N/A"
    assert float(row["aiv_vec_ratio"]) == pytest.approx(0.75) and row["aic_vec_ratio"] == "N/A"
    assert float(row["aiv_mte1_ratio"]) == 0.0 and float(row["aiv_fixpipe_ratio"]) == 0.0
    arithmetic = row_of([record], "ArithmeticUtilization")
    assert float(arithmetic["aiv_vec_fp16_ratio"]) == pytest.approx(0.75) and arithmetic["aiv_vector_fops"] == "1000000"


def test_memory_bandwidths_divide_the_bytes_of_each_level_by_the_task_duration() -> None:
    work = Work(cube_flops=1.0, bytes_read=1000, l2_bytes_read=300, bytes_written=500)
    row = row_of([kernel_record(work=work, l2_hit=0.4, start=0, end=100)], "Memory")
    assert float(row["aic_main_mem_read_bw(GB/s)"]) == pytest.approx(600 / 100)  # misses: 1000 * 0.6
    assert float(row["aic_l2_read_bw(GB/s)"]) == pytest.approx((400 + 300) / 100)
    assert float(row["aic_main_mem_write_bw(GB/s)"]) == pytest.approx(5.0)
    assert float(row["aic_l1_write_bw(GB/s)"]) == pytest.approx(13.0)


def test_l2_requests_count_512_byte_lines_and_in_place_writes_hit() -> None:
    x = tensor(0x1000, (1024,), FP32)  # 4096 bytes = 8 lines
    work = Work(vector_ops=1, bytes_read=4096, bytes_written=4096)
    record = kernel_record(work=work, l2_hit=0.5, args=(x, x), outputs=(1,), core_kind=CoreKind.AIVEC)
    row = row_of([record], "L2Cache")
    assert (row["aiv_read_cache_hit"], row["aiv_read_cache_miss_allocate"]) == ("4", "4")
    assert (row["aiv_write_cache_hit"], row["aiv_write_cache_miss_allocate"]) == ("8", "0")
    assert metrics.l2_hit_rate(record) == pytest.approx(12 / 16)


def test_tensor_columns_list_inputs_and_outputs_with_dtypes_and_nd_format() -> None:
    a, b, y = tensor(0x100, (16, 32)), tensor(0x200, (32, 8)), tensor(0x300, (16, 8), FP32)
    row = row_of([kernel_record(args=(a, b, y), outputs=(2,))])
    assert (row["Input Shapes"], row["Input Data Types"], row["Input Formats"]) == (
        "16,32;32,8",
        "FLOAT16;FLOAT16",
        "ND;ND",
    )
    assert (row["Output Shapes"], row["Output Data Types"], row["Output Formats"]) == ("16,8", "FLOAT", "ND")


def test_wait_time_is_the_gap_since_the_previous_task_of_the_same_stream_ended() -> None:
    records = [
        kernel_record(stream=1, task=0, start=0, end=1000),
        other_record(SqeType.EVENT_RECORD, stream=1, task=1, start=1000, end=1100),
        kernel_record(stream=1, task=2, start=1600, end=2600),
        kernel_record(stream=2, task=0, start=1200, end=1400),
    ]
    assert profiler.wait_times_ns(records) == [0, 0, 500, 0]
    head, rows = profiler.op_summary(records, CHIP)
    waits = [(r[head.index("Stream ID")], r[head.index("Task Wait Time(us)")]) for r in rows]
    assert waits == [("1", "0.000"), ("2", "0.000"), ("1", "0.500")]  # kernels only, in start order


def test_task_time_lists_every_task_with_its_kernel_type() -> None:
    records = [
        kernel_record(),
        other_record(SqeType.SDMA, start=2000, end=2500),
        other_record(SqeType.EVENT_WAIT, start=3000, end=3100),
    ]
    head, rows = profiler.task_time(records)
    assert head == [
        "Device_id",
        "kernel_name",
        "kernel_type",
        "stream_id",
        "task_id",
        "task_time(us)",
        "task_start(us)",
        "task_stop(us)",
    ]
    assert [r[2] for r in rows] == ["KERNEL_AICORE", "MEMCPY_ASYNC", "STREAM_WAIT_EVENT"]
    assert rows[1][5:] == ["0.500", "2.000", "2.500"]


def test_l2_cache_csv_has_one_row_per_kernel() -> None:
    head, rows = profiler.l2_cache([kernel_record(), other_record(SqeType.SDMA, start=2000)])
    assert head == ["Device_id", "Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]
    assert len(rows) == 1 and rows[0][-1] == "matmul"


def test_api_statistic_counts_calls_and_their_total_avg_min_max() -> None:
    calls = [
        HostSlice("aclrtMalloc", 0, 8000, 1),
        HostSlice("aclrtMalloc", 9000, 11000, 1),
        HostSlice("aclrtFree", 20000, 20200, 1),
    ]
    head, rows = summary.api_statistic(calls)
    assert head[:7] == ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)"]
    assert rows[0][1:7] == ["aclrtMalloc", "10.000", "2", "5.000", "2.000", "8.000"]
    assert rows[1][1:4] == ["aclrtFree", "0.200", "1"]


def test_submitting_calls_get_host_slices_ending_at_the_doorbell() -> None:
    costs = HostCosts()
    tasks = [
        kernel_record(start=5000),
        other_record(SqeType.EVENT_WAIT, start=9000),
        other_record(SqeType.PLACE_HOLDER, start=9500),
    ]
    slices = profiler.host_slices(tasks, [], costs, thread_id=7)
    assert [(s.name, s.start_ns, s.end_ns) for s in slices] == [
        ("aclrtLaunchKernel", 5000 - costs.launch_ns, 5000),
        ("aclrtStreamWaitEvent", 9000 - costs.event_ns, 9000),
        ("aclrtLaunchCallback", 9500 - costs.call_ns, 9500),
    ]
    assert all(s.thread_id == 7 and s.task is not None for s in slices)


def test_memory_bound_compares_mte2_with_the_busiest_compute_pipe() -> None:
    record = kernel_record(pipes=PipeTimes(500.0, 0, 0, 2000.0, 0, 2000.0))
    assert metrics.memory_bound(record, CHIP) == pytest.approx(4.0)
    assert math.isclose(metrics.memory_bound(kernel_record(), CHIP), 0.5)
