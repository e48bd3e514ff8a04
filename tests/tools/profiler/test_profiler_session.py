"""cannrt.profile(): what a profiled program leaves behind (files, records, trace, flows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from profiler_records import task_slices

import cannrt
from cannrt.api.profile import Profile, profile
from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.core import Runtime
from cannrt.tools.profiler import validate_trace

CSV_PREFIXES = ("op_summary", "task_time", "l2_cache", "api_statistic", "memory_record")


def workload() -> None:
    """Two streams: matmul + gelu on one, relu on the other after an event, a copy back, a callback."""
    device = cannrt.Device(0)
    first, second = device.stream(), device.stream()
    x = device.array(np.ones((256, 256), np.float16))
    w = device.array(np.ones((256, 256), np.float16))
    y = device.empty((256, 256), np.float32)
    first.launch("matmul", x, w, y, block_dim=8)
    first.launch("gelu", y, y, block_dim=16)
    second.wait(first.record())
    second.launch("relu", y, y, block_dim=4)
    first.launch_host_func(lambda *_: None)
    y.to_numpy(second)
    device.synchronize()


def profiled(tmp_path: Path, **options: object) -> Profile:
    cannrt.Device(0)
    with profile(tmp_path, **options) as prof:  # type: ignore[arg-type]
        workload()
    return prof


def test_files_follow_the_msprof_layout(rt: Runtime, tmp_path: Path) -> None:
    prof = profiled(tmp_path)
    assert prof.path is not None and prof.path.parent == tmp_path and prof.path.name.startswith("PROF_")
    names = sorted(p.name for p in (prof.path / "mindstudio_profiler_output").iterdir())
    assert [n.rsplit("_", 1)[0] for n in names] == [
        "api_statistic",
        "l2_cache",
        "memory_record",
        "msprof",
        "op_summary",
        "report_data",
        "task_time",
    ]
    assert all(n.endswith(".json" if n.startswith(("msprof", "report_data")) else ".csv") for n in names)


def test_op_summary_rows_describe_the_kernels_that_ran(rt: Runtime, tmp_path: Path) -> None:
    rows = profiled(tmp_path).op_summary()
    assert [(r["Op Name"], r["Task Type"], r["Block Num"]) for r in rows] == [
        ("matmul", "AI_CORE", "8"),
        ("gelu", "AI_VECTOR_CORE", "16"),
        ("relu", "AI_VECTOR_CORE", "4"),
    ]
    assert rows[0]["Input Shapes"] == "256,256;256,256" and rows[0]["Output Data Types"] == "FLOAT"


def test_a_known_matmul_gives_its_roofline_cycles_and_ratios(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x, w = device.empty((256, 256), np.float16), device.empty((256, 256), np.float16)
    y = device.empty((256, 256), np.float32)
    with profile() as prof:
        stream.launch("matmul", x, w, y, block_dim=1)
        stream.synchronize()
    (record,) = [r for r in prof.records if r.name == "matmul"]
    (row,) = prof.op_summary()
    chip = rt.settings.chip
    ghz = chip.clock_mhz / 1000
    cube_ns = 2 * 256**3 / (2 * chip.cube_macs_per_cycle * ghz * 0.9)  # one block does all the work
    assert record.work is not None
    mte2_ns = (record.work.bytes_read + record.work.l2_bytes_read) / chip.core_l1_read_gbps
    block_ns = record.blocks[0][2] - record.blocks[0][1]
    assert block_ns == int(cube_ns)  # compute bound: the block lasts as long as its cube pipe
    assert row["total_cycles"] == str(round(block_ns * chip.clock_mhz / 1000))
    assert float(row["aicore_time(us)"]) == pytest.approx(block_ns / 1000, abs=1e-3)
    assert float(row["aic_mac_ratio"]) == pytest.approx(1.0)
    assert float(row["aic_mte2_ratio"]) == pytest.approx(mte2_ns / block_ns, rel=1e-5)


def test_the_trace_is_valid_and_has_host_stream_and_core_tracks(rt: Runtime, tmp_path: Path) -> None:
    prof = profiled(tmp_path)
    assert prof.path is not None
    (path,) = (prof.path / "mindstudio_profiler_output").glob("msprof_*.json")
    trace = json.loads(path.read_text())
    assert validate_trace(trace) == []
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {
        "Host (CANN API)",
        "Host thread 1",
        "Stream 1",
        "Stream 2",
        "AI Core 0",
        "AI Vector Core 0",
        "SDMA 0",
    } <= names
    counters = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"}
    assert {"AI Core busy", "AI Vector Core busy", "HBM bandwidth (GB/s)"} <= counters
    assert all(isinstance(e["ts"], float | int) for e in trace["traceEvents"] if e["ph"] != "M")


def test_every_submitted_task_has_one_flow_from_its_launch_slice(rt: Runtime, tmp_path: Path) -> None:
    prof = profiled(tmp_path)
    events = prof.trace()["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    starts = {e["bind_id"]: e for e in slices if e.get("flow_out")}
    finishes = {e["bind_id"]: e for e in slices if e.get("flow_in")}
    assert starts.keys() == finishes.keys() and len(starts) == len(prof.records)
    assert all(starts[i]["pid"] == 1 and finishes[i] in task_slices({"traceEvents": slices}) for i in starts)
    assert all(starts[i]["ts"] + starts[i]["dur"] <= finishes[i]["ts"] + 1e-6 for i in starts)

    launched = {starts[i]["name"]: finishes[i]["name"] for i in starts}
    assert launched["aclrtLaunchKernel"] in {"matmul", "gelu", "relu"}
    assert launched["aclrtMemcpyAsync"] == "MEMCPY_ASYNC D2H"
    assert launched["aclrtStreamWaitEvent"] == "STREAM_WAIT_EVENT"
    assert launched["aclrtLaunchCallback"] == "HOST_CALLBACK"
    api = {e["name"] for e in slices if e["pid"] == 1}
    assert {"aclrtMalloc", "aclrtMemcpy", "aclrtRecordEvent", "aclrtSynchronizeDevice"} <= api


def test_two_runs_of_one_program_give_identical_csv_files(make_runtime: Callable[..., Runtime], tmp_path: Path) -> None:
    contents = []
    for run in range(2):
        make_runtime()
        prof = profiled(tmp_path / str(run))
        assert prof.path is not None
        files = sorted((prof.path / "mindstudio_profiler_output").glob("*.csv"))
        contents.append({f.name.rsplit("_", 1)[0]: f.read_text() for f in files})
    assert set(contents[0]) == set(CSV_PREFIXES)
    assert contents[0] == contents[1]


@pytest.mark.parametrize("group", ["ArithmeticUtilization", "Memory", "L2Cache"])
def test_other_metrics_groups_write_their_columns(rt: Runtime, tmp_path: Path, group: str) -> None:
    rows = profiled(tmp_path, aicore_metrics=group).op_summary()
    assert rows and all(len(r) == len(rows[0]) for r in rows)
    assert any(k.startswith("aic_") for k in rows[0])


def test_nothing_is_recorded_when_profiling_is_off(rt: Runtime) -> None:
    cannrt.Device(0)
    with profile() as prof:
        pass
    workload()
    assert prof.records == [] and prof.api == [] and prof.op_summary() == []
    assert rt.api_records is None and rt.driver.trace_read(0, rt.host_time_ns) == []


def test_a_second_profiler_on_the_same_runtime_is_refused(rt: Runtime) -> None:
    cannrt.Device(0)
    with profile(), pytest.raises(CannError) as caught, profile():
        pass
    assert caught.value.code == ErrorCode.PROF_ALREADY_RUN


def test_the_table_lists_kernels_by_total_time(rt: Runtime, tmp_path: Path) -> None:
    table = profiled(tmp_path).table()
    assert table.row_count == 3
    assert [c.header for c in table.columns][:3] == ["Op Name", "Task Type", "Count"]


def test_each_traced_device_gets_its_own_process(rt: Runtime, tmp_path: Path) -> None:
    with profile(devices=[0, 1]) as prof:
        for index in (0, 1):
            device = cannrt.Device(index)
            stream = device.stream()
            stream.launch("spin", 2000, block_dim=2)
            stream.synchronize()
    assert sorted({r.device_id for r in prof.records}) == [0, 1]
    trace = prof.trace()
    assert validate_trace(trace) == []
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {"NPU 0 (Ascend910B1)", "NPU 1 (Ascend910B1)"} <= processes
    folder = prof.write(tmp_path, stamp="20240101000000")
    names = {p.name for p in (folder / "mindstudio_profiler_output").iterdir()}
    assert "op_summary_20240101000000.csv" in names and "msprof_20240101000000.json" in names
