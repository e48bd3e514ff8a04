"""The streaming writer: its rows, made once per task shape, are the rows of the per-record
summary functions; the op totals of the report are those of every task added one by one; the
trace links every launch to its task by a flow bound to both slices and names no category."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from profiler_records import task_slices

import cannrt
from cannrt.api.profile import profile
from cannrt.runtime.core import Runtime
from cannrt.tools import profiler
from cannrt.tools.profiler import validate_trace
from cannrt.tools.profiler.shapes import ShapeCache
from cannrt.tools.profiler.stats import ProfileStats
from cannrt.tools.profiler.trace import us_text
from cannrt.tools.profiler.writer import OUTPUT_DIR


def mixed_workload() -> None:
    """Repeated shapes (nop, one relu) and changing ones (relu on two sizes, matmul, copies)."""
    device = cannrt.Device(0)
    stream = device.stream()
    small, large = device.array(np.ones(64, np.float32)), device.array(np.ones(4096, np.float32))
    square = device.array(np.ones((8, 8), np.float32))  # as long as small to run, not the same shape
    a = device.array(np.ones((32, 32), np.float16))
    out = device.empty((32, 32), np.float32)
    for index in range(6):
        stream.launch("nop")
        stream.launch("relu", small, small)
        stream.launch("relu", square, square)
        stream.launch("relu", large if index % 2 else small, large if index % 2 else small, name=f"node{index}/Relu")
        stream.launch("matmul", a, a, out, block_dim=2)
    out.to_numpy(stream)
    stream.synchronize()


def csv_rows(folder: Path, prefix: str) -> list[list[str]]:
    (path,) = (folder / OUTPUT_DIR).glob(f"{prefix}_*.csv")
    with path.open(newline="") as handle:
        return list(csv.reader(handle))


@pytest.mark.parametrize("group", ["PipeUtilization", "Memory", "L2Cache", "ArithmeticUtilization"])
def test_written_rows_are_the_rows_of_the_summary_functions(rt: Runtime, tmp_path: Path, group: str) -> None:
    cannrt.Device(0)
    with profile(tmp_path, aic_metrics=group) as prof:
        mixed_workload()
    assert prof.path is not None
    records, names = prof.records, prof.op_names
    head, rows = profiler.op_summary(records, rt.settings.chip, group, names, prof.op_types)
    assert csv_rows(prof.path, "op_summary") == [head, *rows]
    kernels = [r for r in profiler.records.device_tasks(records) if profiler.records.is_kernel(r)]
    assert csv_rows(prof.path, "l2_cache")[1:] == [
        profiler.summary.l2_row(r, names.get((r.device_id, r.stream_id, r.task_id, r.arrival_ns))) for r in kernels
    ]
    assert len(csv_rows(prof.path, "task_time")) == 1 + len(profiler.records.device_tasks(records))


def test_report_op_totals_are_those_of_each_task_added_alone(rt: Runtime, tmp_path: Path) -> None:
    cannrt.Device(0)
    with profile(tmp_path) as prof:
        mixed_workload()
    assert prof.path is not None
    (report,) = (prof.path / OUTPUT_DIR).glob("report_data_*.json")
    stats = ProfileStats(rt.settings.chip)
    for record in prof.records:
        stats.add_task(record, prof.op_name(record))
    written = json.loads(report.read_text())["kernels"]
    expected = stats.kernel_rows()
    assert [(k["name"], k["count"], k["total_us"]) for k in written] == [
        (k["name"], k["count"], k["total_us"]) for k in expected
    ]
    for got, want in zip(written, expected, strict=True):
        assert got["ratios"] == pytest.approx(want["ratios"], abs=1e-6)
        assert got["l2_hit"] == pytest.approx(want["l2_hit"], abs=1e-6)


def test_each_launch_is_bound_to_its_task_and_no_event_has_a_category(rt: Runtime) -> None:
    cannrt.Device(0)
    with profile() as prof:
        mixed_workload()
    trace = prof.trace()
    assert validate_trace(trace) == []
    events = trace["traceEvents"]
    assert not any("cat" in e for e in events)
    sources = [e for e in events if e.get("flow_out")]
    tasks = {e["bind_id"]: e for e in task_slices(trace) if e.get("flow_in")}
    assert len(sources) == len(tasks) == len(prof.records)
    assert {e["name"] for e in sources} == {"aclrtLaunchKernel", "aclrtMemcpyAsync"}
    assert {tasks[e["bind_id"]]["name"] for e in sources if e["name"] == "aclrtMemcpyAsync"} == {"MEMCPY_ASYNC D2H"}


@pytest.mark.parametrize(
    ("ns", "text"), [(0, "0"), (13000, "13"), (13500, "13.5"), (1, "0.001"), (123456789, "123456.789"), (-1500, "-1.5")]
)
def test_trace_times_are_microseconds_with_the_digits_needed(ns: int, text: str) -> None:
    assert us_text(ns) == text
    assert float(text) * 1000 == pytest.approx(ns)


def test_memory_record_follows_the_memory_timeline_from_the_profile_start(rt: Runtime, tmp_path: Path) -> None:
    device = cannrt.Device(0)
    kept = device.empty(1 << 20, np.uint8)  # held before the profile starts
    with profile(tmp_path) as prof:
        scratch = device.empty(16 << 20, np.uint8)
        scratch.free()
    assert prof.path is not None
    head, *rows = csv_rows(prof.path, "memory_record")
    allocated = [int(r[head.index("Total Allocated(KB)")]) for r in rows]
    reserved = [int(r[head.index("Total Reserved(KB)")]) for r in rows]
    assert allocated[0] >= 1024 and max(allocated) >= allocated[0] + 16 * 1024 and allocated[-1] == allocated[0]
    assert all(r >= a for r, a in zip(reserved, allocated, strict=True))
    kept.free()


def test_the_shape_of_the_task_before_is_reused_only_for_a_task_of_that_shape(rt: Runtime) -> None:
    stream = cannrt.Device(0).stream()
    with profile() as prof:
        for _ in range(3):
            stream.launch("nop")
        stream.synchronize()
    first, second, third = prof.records
    chip = rt.settings.chip
    cache = ShapeCache(chip, "PipeUtilization", ProfileStats(chip))
    shape = cache.get(first, None, None)
    assert cache.get(second, None, None) is shape  # the same shape (the fast path)
    longer = third._replace(end_ns=third.end_ns + 1000)
    assert cache.get(longer, None, None) is not shape  # another duration: another shape
    assert cache.get(third, None, None) is shape  # back to the first one (from the cache)
    named = cache.get(third, "node/Nop", "Nop")
    assert named is not shape and named.name == "node/Nop"
