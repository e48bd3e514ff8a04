"""Streaming collection: records spill to disk in sorted chunks and read back merged; the written
profile does not depend on the chunk size; counter tracks stay bounded."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
from profiler_records import kernel_record, task_slices

import cannrt
from cannrt.abi import TaskRecord
from cannrt.api.profile import CALL_ORDER, TASK_ORDER, profile
from cannrt.runtime.core import Runtime
from cannrt.runtime.tracing import ApiRecord
from cannrt.tools.profiler import validate_trace
from cannrt.tools.profiler.counters import CounterTrack
from cannrt.tools.profiler.spool import HostSpool, RecordSpool


def test_a_spool_keeps_at_most_one_chunk_in_memory_and_reads_back_in_order(tmp_path: Path) -> None:
    spool = RecordSpool(tmp_path, TaskRecord._make, TASK_ORDER, chunk=64)
    rng = random.Random(5)
    made = []
    for task in range(1000):
        start = rng.randrange(0, 10**6)
        record = kernel_record(task=task, start=start, end=start + 100, blocks=((0, start, start + 100),))
        spool.append(record)
        made.append(record)
        assert len(spool) < 64
    assert spool.collected == 1000 and len(spool.runs) == 1000 // 64
    assert list(spool.sorted_records()) == sorted(made, key=TASK_ORDER)
    assert (spool.first, spool.last) == (min(r.start_ns for r in made), max(r.end_ns for r in made))
    spool.close()
    assert list(tmp_path.iterdir()) == []


def workload() -> None:
    device = cannrt.Device(0)
    first, second = device.stream(), device.stream()
    x = device.array(np.ones((64, 64), np.float16))
    y = device.empty((64, 64), np.float32)
    for index in range(20):
        first.launch("matmul", x, x, y, block_dim=2, name=f"mm{index % 3}")
        second.launch("relu", y, y, block_dim=4)
        second.wait(first.record())
    y.to_numpy(second)
    device.synchronize()


def written(root: Path, chunk: int) -> dict[str, str]:
    cannrt.reset_runtime()
    cannrt.Device(0)
    with profile(root, chunk=chunk) as prof:
        workload()
    assert prof.path is not None
    if chunk < 100:
        assert sum(len(s.runs) for s in prof._tasks.values()) > 1 and len(prof.host_spool.runs) > 1
    out = prof.path / "mindstudio_profiler_output"
    return {p.name.rsplit("_", 1)[0]: p.read_text() for p in sorted(out.iterdir())}


def test_the_profile_written_does_not_depend_on_the_chunk_size(rt: Runtime, tmp_path: Path) -> None:
    small, whole = written(tmp_path / "small", 7), written(tmp_path / "whole", 1 << 20)
    assert small.keys() == whole.keys()
    for name in small:
        assert small[name] == whole[name], name


def test_counter_tracks_over_a_long_span_are_bin_means_with_a_bounded_point_count() -> None:
    span = (0, 10_000_000)  # 10 ms over 100 points: 100 us bins
    track = CounterTrack("busy", 100, span, points=100)
    for start in range(0, 10_000_000, 2000):  # busy half of every 2 us
        track.span(start, start + 1000, {"cores": 1.0})
        track.flush_before(start)
    events = track.finish()
    assert 0 < len(events) <= 101
    assert all(abs(e["args"]["cores"] - 0.5) < 1e-6 for e in events[:-1])


def test_counter_tracks_over_a_short_span_step_at_every_change() -> None:
    track = CounterTrack("busy", 100, (0, 5000), points=100)
    track.span(0, 3000, {"cores": 1.0})
    track.span(1000, 5000, {"cores": 1.0})
    points = [(e["ts"], e["args"]["cores"]) for e in track.finish()]
    assert points == [(0.0, 1.0), (1.0, 2.0), (3.0, 1.0), (5.0, 0.0)]


def test_a_trace_with_spilled_chunks_keeps_the_perfetto_rules(rt: Runtime, tmp_path: Path) -> None:
    cannrt.Device(0)
    with profile(chunk=5) as prof:
        workload()
    trace = prof.trace()
    assert validate_trace(trace) == []
    names = {e["name"] for e in task_slices(trace)}
    assert {"mm0", "mm1", "mm2", "relu"} <= names


def test_host_threads_appending_at_once_lose_no_record(tmp_path: Path) -> None:
    spool = HostSpool(tmp_path, ApiRecord._make, CALL_ORDER, chunk=50)

    def calls(thread: int) -> None:
        for index in range(1000):
            spool.append(ApiRecord("aclrtMalloc", index, index + 1, thread))

    threads = [threading.Thread(target=calls, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert spool.collected == 4000 and len(list(spool.sorted_records())) == 4000
