"""What a new user tripped over: printing the table, msprof's keyword, op names, nested API calls,
the L2 hit rate of the table, and the memory-in-use track."""

from __future__ import annotations

import numpy as np
import pytest
from profiler_records import task_slices

import cannrt
from cannrt.api.profile import profile
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime
from cannrt.tools.profiler import validate_trace
from cannrt.tools.profiler.metrics import l2_hit_rate


def matmul_profile(**options: object) -> object:
    device = cannrt.Device(0)
    stream = device.stream()
    x = device.array(np.ones((512, 512), np.float16))
    y = device.empty((512, 512), np.float32)
    with profile(**options) as prof:  # type: ignore[arg-type]
        stream.launch("matmul", x, x, y, block_dim=8)
        stream.launch("matmul", x, x, y, block_dim=8)
        stream.synchronize()
    return prof


def test_print_of_the_table_prints_the_table(rt: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    prof = matmul_profile()
    print(prof.table())  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "Op Name" in out and "matmul" in out and "<rich" not in out


def test_the_table_l2_hit_is_the_l2_cache_hit_rate(rt: Runtime) -> None:
    prof = matmul_profile()
    records = [r for r in prof.records if r.name == "matmul"]  # type: ignore[attr-defined]
    table = prof.table()  # type: ignore[attr-defined]
    (hit_column,) = [c for c in table.columns if c.header == "L2 hit"]
    (cell,) = list(hit_column.cells)
    rates = [l2_hit_rate(r) for r in records]
    assert max(rates) > 0.5 and float(cell) == pytest.approx(sum(rates) / len(rates), abs=0.01)


def test_msprof_keyword_aic_metrics_and_pyacl_keyword_aicore_metrics(rt: Runtime) -> None:
    assert matmul_profile(aic_metrics="Memory").op_summary()[0].keys() >= {"aic_main_mem_read_bw(GB/s)"}  # type: ignore[attr-defined]
    assert "aic_read_cache_hit" in matmul_profile(aicore_metrics="L2Cache").op_summary()[0]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown aicore_metrics"):
        matmul_profile(aic_metrics="Cube")


def test_a_named_launch_is_its_op_name_and_the_kernel_its_op_type(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x = device.array(np.ones(64, np.float32))
    with profile() as prof:
        for step in range(2):  # the second launch of each shape is a kept one
            stream.launch("relu", x, x, name=f"block{step}/Relu")
            stream.launch("relu", x, x)
        stream.synchronize()
    rows = [(r["Op Name"], r["OP Type"]) for r in prof.op_summary()]
    assert rows == [("block0/Relu", "relu"), ("relu", "relu"), ("block1/Relu", "relu"), ("relu", "relu")]
    tasks = task_slices(prof.trace())
    assert [e["name"] for e in tasks][:2] == ["block0/Relu", "relu"]
    assert tasks[0]["args"]["OP Type"] == "relu"


def test_a_call_that_makes_internal_calls_is_counted_once(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    with profile() as prof:
        start = stream.record()
        stream.launch("spin", 1000)
        end = stream.record()
        end.synchronize()
        start.elapsed_ms(end)
    names = [a.name for a in prof.api_records]
    assert names.count("aclrtEventElapsedTime") == 1 and "aclrtQueryEventStatus" not in names


def test_the_trace_has_an_hbm_in_use_track_that_rises_and_falls(rt: Runtime) -> None:
    context = cannrt.Device(0).context
    with profile() as prof:
        address = memory_ops.malloc(context, 16 << 20)
        memory_ops.free(context, address)
    trace = prof.trace()
    assert validate_trace(trace) == []
    track = [e["args"] for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "HBM memory (bytes)"]
    used = [point["allocated"] for point in track]
    assert max(used) >= 16 << 20 and used[-1] < max(used)
    assert all(point["reserved"] >= point["allocated"] for point in track)
