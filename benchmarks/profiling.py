"""Profiler benchmark: what profiling costs, in wall time, trace bytes and memory.

Every figure is a ratio to a baseline measured in the same run:
- a launch-bound workload (N `nop` launches on one stream, then a synchronize; its device opened
  before the clock starts and before the profile, which traces the devices open when it starts)
  and `cannrt demo`, each with profiling off and on, runs interleaved, the median and the fastest of
  each and the median of each round's own ratio (collection alone, and collection plus writing the
  msprof folder);
- bytes of trace (msprof_<ts>.json) and of the whole folder per task of the launch-bound profile;
- peak RSS, and RSS at the end of collection, of a child process that runs 1,000,000 empty tasks
  with profiling on (collecting, then writing) against one that runs them unprofiled, and the rate
  at which its writer writes tasks against the rate at which they were collected (profiled run);
- per stage, CPU nanoseconds per task of collection as it is (each completed task packed into a
  row of the device's log, a chunk of rows to disk, read back) against the per-task path it
  replaced, run on the same tasks (a TaskRecord built per task, appended to a spool that sorts and
  pickles them); the rows go to disk at once here, where a profile keeps its newest chunks in memory.
Run: python3 benchmarks/profiling.py [--tasks N] [--repeats R] [--demo-repeats D] [--rss-tasks M]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.abi import TaskRecord
from cannrt.abi.records import TaskChunk
from cannrt.api.profile import TASK_ORDER, profile
from cannrt.device.records import TaskLog, task_record
from cannrt.runtime.core import get_runtime
from cannrt.tools.profiler.spool import RecordSpool, TaskSpool

GOAL_RATIO = 1.10
GOAL_BYTES_PER_TASK = 200
GOAL_RSS_MIB = 200
BATCH = 10000  # launches between synchronizes in the RSS children
SETTLED = 1024  # completed tasks a log settles at once in the stage benchmark (an SQ's depth)


def launch_bound(stream: cannrt.Stream, tasks: int) -> None:
    for _ in range(tasks):
        stream.launch("nop")
    stream.synchronize()


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def unprofiled(tasks: int) -> Callable[[], Callable[[], object]]:
    """The launch-bound run without profiling (its device opened before the clock starts)."""

    def setup() -> Callable[[], object]:
        stream = cannrt.Device(0).stream()
        return lambda: launch_bound(stream, tasks)

    return setup


def profiled(tasks: int, output: str | None) -> Callable[[], Callable[[], object]]:
    """The launch-bound run profiled (the device is open when the profile starts, so it is traced)."""

    def setup() -> Callable[[], object]:
        stream = cannrt.Device(0).stream()

        def run() -> None:
            with profile(output) as prof:
                launch_bound(stream, tasks)
            assert prof.task_count == tasks, "the profile did not trace the device"

        return run

    return setup


def demo(output: str | None) -> Callable[[], Callable[[], object]]:
    from cannrt.cli.demo import run_demo

    def run() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert run_demo(profile_dir=output) == 0

    return lambda: run


def interleaved(runs: dict[str, Callable[[], Callable[[], object]]], repeats: int) -> dict[str, list[float]]:
    """Wall seconds of each run (made by its setup on a fresh runtime, from a collected heap), the
    runs taking turns, in reverse order every other round (whatever the run before leaves behind
    falls on each run alike)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats):
        order = list(runs.items())
        for name, setup in order if round_ % 2 == 0 else order[::-1]:
            cannrt.reset_runtime()
            run = setup()
            gc.collect()  # the garbage of the run before is not collected during this one
            times[name].append(timed(run))
    return times


def ratio_rows(label: str, times: dict[str, list[float]], on: str, goal: str) -> list[tuple[str, ...]]:
    """Rows of one comparison: the medians, the fastest runs (the shared machine's other processes
    and the device worker's timing only ever add time to a run), and the median of each round's
    own ratio (its runs are adjacent: the machine's speed, which swings minute to minute, cancels;
    the goal is judged on the median row, as before this row existed)."""
    rows = []
    for how, pick in (("median", statistics.median), ("fastest", min)):
        off_s, on_s = pick(times["off"]), pick(times[on])
        rows.append((f"{label} ({how})", f"{off_s:.3f}", f"{on_s:.3f}", f"{on_s / off_s:.2f}x", goal))
    paired = statistics.median(b / a for a, b in zip(times["off"], times[on], strict=True))
    rows.append((f"{label} (median of each round's ratio)", "", "", f"{paired:.2f}x", goal))
    return rows


def child_rss(tasks: int, on: bool) -> dict[str, float]:
    """Run the RSS child in a fresh process; returns its report."""
    command = [sys.executable, __file__, "--child", str(tasks), "on" if on else "off"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    report: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def rss_now_mib() -> float:
    """Resident set size now (VmRSS), MiB; peak RSS (ru_maxrss) also counts import-time peaks."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(tasks: int, on: bool) -> None:
    """The RSS child: run `tasks` empty tasks (profiled or not); print peak RSS (MiB) and times."""
    stream = cannrt.Device(0).stream()
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        with profile() if on else contextlib.nullcontext() as prof:
            for done in range(0, tasks, BATCH):
                for _ in range(min(BATCH, tasks - done)):
                    stream.launch("nop")
                stream.synchronize()
        collected = time.perf_counter() - start
        collect_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        collect_now = rss_now_mib()
        written, size = 0.0, 0
        if prof is not None:
            start = time.perf_counter()
            folder = prof.write(root)
            written = time.perf_counter() - start
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = {"collect_rss": collect_rss, "collect_now": collect_now, "peak_rss": peak}
    print(json.dumps({**report, "collect_s": collected, "write_s": written, "bytes": size}))


def folder_bytes(tasks: int) -> tuple[float, float]:
    """(trace bytes, folder bytes) per task of a launch-bound profile."""
    with tempfile.TemporaryDirectory() as root:
        cannrt.reset_runtime()
        stream = cannrt.Device(0).stream()
        with profile(root) as prof:
            launch_bound(stream, tasks)
        assert prof.path is not None
        files = [f for f in prof.path.rglob("*") if f.is_file()]
        trace = sum(f.stat().st_size for f in files if f.name.startswith("msprof_"))
        return trace / tasks, sum(f.stat().st_size for f in files) / tasks


def completed_tasks(tasks: int) -> list[Any]:
    """The Task objects of a launch-bound run, as a tracing device keeps them (reached through the
    driver's device: a benchmark of the device's own stage)."""
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    runtime.driver.trace_start(0)
    launch_bound(stream, tasks)
    log = runtime.driver._npu(0).timeline.records
    assert log is not None and len(log.tasks) == tasks
    kept: list[Any] = log.tasks
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    return kept


def cpu_ns_per_task(run: Callable[[], object], tasks: int, repeats: int) -> float:
    """Median thread CPU ns per task of run (CPU time: the other processes on the machine do not count)."""
    times = []
    for _ in range(repeats):
        start = time.thread_time_ns()
        run()
        times.append(time.thread_time_ns() - start)
    return statistics.median(times) / tasks


class HeldChunk:
    """A TaskSink that keeps the last chunk it was handed (the log's stage alone, no disk)."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk
        self.last: TaskChunk | None = None

    def add_chunk(self, chunk: TaskChunk) -> None:
        self.last = chunk


def stages(tasks: int, repeats: int) -> list[tuple[str, float, float]]:
    """(stage, ns per task before, ns per task now) on one chunk of completed tasks."""
    done = completed_tasks(tasks)
    with tempfile.TemporaryDirectory() as root:
        records = [task_record(0, task) for task in done]
        made = iter(range(1 << 30))

        def rows() -> TaskChunk:
            log = TaskLog(0, HeldChunk(tasks))
            for first in range(0, tasks, SETTLED):  # as the timeline hands them over
                log.pending += done[first : first + SETTLED]
                log.settle()  # the last one hands the chunk over
            assert log.sink is not None
            chunk: TaskChunk | None = log.sink.last  # type: ignore[attr-defined]
            assert chunk is not None and chunk.tasks == tasks
            return chunk

        chunk = rows()

        def old_spool() -> RecordSpool:
            spool = RecordSpool(os.path.join(root, f"old{next(made)}"), TaskRecord._make, TASK_ORDER, tasks)
            for record in records:
                spool.append(record)  # the last append spills the chunk: sorted and pickled
            return spool

        def new_spool() -> TaskSpool:
            spool = TaskSpool(os.path.join(root, f"new{next(made)}"), TASK_ORDER, tasks, memory_rows=0)
            spool.add_chunk(chunk)  # to disk at once (a profile keeps its newest chunks in memory)
            return spool

        build = (
            cpu_ns_per_task(lambda: [task_record(0, task) for task in done], tasks, repeats),
            cpu_ns_per_task(rows, tasks, repeats),
        )
        write = (cpu_ns_per_task(old_spool, tasks, repeats), cpu_ns_per_task(new_spool, tasks, repeats))
        old, new = old_spool(), new_spool()
        read = (
            cpu_ns_per_task(lambda: sum(1 for _ in old.sorted_records()), tasks, repeats),
            cpu_ns_per_task(lambda: sum(1 for _ in new.sorted_records()), tasks, repeats),
        )
        assert list(old.sorted_records()) == list(new.sorted_records())
    cannrt.reset_runtime()
    return [
        ("device: a completed task -> its record / row", *build),
        ("spool: records -> disk (append, sort, write)", *write),
        ("writer: disk -> TaskRecords in start order", *read),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=15, help="rounds of the launch-bound runs")
    parser.add_argument("--demo-repeats", type=int, default=5, help="rounds of the cannrt demo runs")
    parser.add_argument("--rss-tasks", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, metavar=("TASKS", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1] == "on")
        return
    console = Console()
    table = Table(title="cannrt profiler; baselines measured in the same run")
    for column in ("measure", "baseline", "profiled", "ratio", "goal"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    with tempfile.TemporaryDirectory() as root:
        launch = interleaved(
            {
                "off": unprofiled(args.tasks),
                "on": profiled(args.tasks, None),
                "on+write": profiled(args.tasks, root),
            },
            args.repeats,
        )
        demos = interleaved({"off": demo(None), "on": demo(os.path.join(root, "demo"))}, args.demo_repeats)
    label = f"launch-bound, {args.tasks} nop tasks (s)"
    goal = f"<= {GOAL_RATIO}x"
    for row in (
        *ratio_rows(label + ", collecting", launch, "on", goal),
        *ratio_rows(label + ", + writing", launch, "on+write", ""),
        *ratio_rows("cannrt demo, profiled and written (s)", demos, "on", goal),
    ):
        table.add_row(*row)
    trace, whole = folder_bytes(args.tasks)
    table.add_row("trace bytes per task (msprof_*.json)", "", f"{trace:.0f}", "", f"<= {GOAL_BYTES_PER_TASK}")
    table.add_row("folder bytes per task (JSON + CSVs)", "", f"{whole:.0f}", "", "")
    off, on = child_rss(args.rss_tasks, False), child_rss(args.rss_tasks, True)
    tasks = f"{args.rss_tasks:,} empty tasks"
    table.add_row(
        f"peak RSS, {tasks}, collecting (MiB)",
        f"{off['peak_rss']:.0f}",
        f"{on['collect_rss']:.0f}",
        f"+{on['collect_rss'] - off['peak_rss']:.0f} MiB",
        f"< +{GOAL_RSS_MIB} MiB",
    )
    table.add_row(
        f"RSS at the end of collection, {tasks} (MiB)",
        f"{off['collect_now']:.0f}",
        f"{on['collect_now']:.0f}",
        f"+{on['collect_now'] - off['collect_now']:.0f} MiB",
        f"< +{GOAL_RSS_MIB} MiB",
    )
    table.add_row(
        f"peak RSS, {tasks}, + writing (MiB)",
        f"{off['peak_rss']:.0f}",
        f"{on['peak_rss']:.0f}",
        f"+{on['peak_rss'] - off['peak_rss']:.0f} MiB",
        f"< +{GOAL_RSS_MIB} MiB",
    )
    table.add_row(
        f"wall, {tasks}: run / write (s)",
        f"{off['collect_s']:.1f}",
        f"{on['collect_s']:.1f} / {on['write_s']:.1f}",
        f"{on['collect_s'] / off['collect_s']:.2f}x",
        "",
    )
    collect_rate, write_rate = args.rss_tasks / on["collect_s"], args.rss_tasks / max(on["write_s"], 1e-9)
    table.add_row(
        f"writer vs collection rate, {tasks} (tasks/s)",
        f"{collect_rate:,.0f}",
        f"{write_rate:,.0f}",
        f"{write_rate / collect_rate:.2f}x",
        "",
    )
    table.add_row(f"folder bytes per task, {tasks}", "", f"{on['bytes'] / args.rss_tasks:.0f}", "", "")
    console.print(table)
    chunk = 16384
    per_stage = Table(title=f"collection stages, CPU ns per task over {chunk} completed nop tasks (median)")
    for column in ("stage", "per-task records (before)", "rows (now)", "ratio"):
        per_stage.add_column(column, justify="left" if column == "stage" else "right")
    for name, before, now in stages(chunk, max(3, args.demo_repeats)):
        per_stage.add_row(name, f"{before:.0f}", f"{now:.0f}", f"{now / before:.2f}x")
    console.print(per_stage)


if __name__ == "__main__":
    main()
