"""Search below the greedy peak: the portfolio of exact solvers run within the time limit.

The canonical branch and bound (compiled), the skyline branch and bound, the skyline as a
greedy, then CP-SAT (cpsat.py) against the skyline search in a forked child.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from cannrt.memory.planner import canonical, cpsat, skyline
from cannrt.memory.planner.buffers import (
    Arrays,
    IntArray,
    InvalidPackingError,
    Packing,
    Progress,
    validate,
)
from cannrt.memory.planner.cpsat import STOPPERS, Best

SKYLINE_SLICE = 0.2
"""Share of the time limit for the in-process skyline branch and bound (at most SKYLINE_SLICE_MAX)."""
SKYLINE_SLICE_MAX = 1.5
INFER_MAX = 600
"""Above this many buffers the skyline runs without its quadratic inference (resnet50: 0.2 s vs > 1.5 s)."""
PARALLEL_MIN_SECONDS = 2.0
CANONICAL_MAX = 5000
"""Above this many buffers the canonical search is skipped (its tables grow with overlaps)."""
CANONICAL_SLICE = 0.5
"""Share of the time limit for the canonical search before the rest of the portfolio."""


LARGE_GRAPH = 5000  # buffers above which the skyline greedy runs in area order only


def improve(
    start: Packing,
    bound: int,
    target: int,
    deadline: float,
    progress: Progress | None = None,
) -> Packing:
    """Best packing found before `deadline` (monotonic clock), never worse than `start`.

    Stops early at a packing with peak <= `target`. Every returned packing is validated.
    The portfolio: the canonical branch and bound (half the time), the skyline branch and bound
    (short, in process), then the skyline run as a
    greedy when the target was not met, then — sharing the two cores — the branch and bound in
    a child process against CP-SAT.
    """
    began = time.monotonic()
    arrays = Arrays.of(start.buffers)
    best = Best(np.asarray(start.offsets, np.int64), start.peak)
    solver = start.solver

    def offer(offsets: IntArray | None, name: str) -> bool:
        nonlocal solver
        if offsets is None:
            return False
        peak = int((offsets + arrays.size).max(initial=0))
        if peak < best.peak:
            best.offsets, best.peak, solver = offsets, peak, name
            if progress is not None:
                progress(time.monotonic() - began, peak)
        return best.peak <= target

    def remaining() -> float:
        return deadline - time.monotonic()

    refuted = False  # the target is proven infeasible
    optimal = False  # the best peak is proven minimal
    # 0. the canonical branch and bound (compiled; its first use in a process may compile it,
    # which does not count against the time limit)
    if len(arrays) <= CANONICAL_MAX and canonical.available() and canonical.fits_in_memory(arrays):
        if not canonical.compiled():
            deadline += canonical.warm_up()  # compiling is not charged to the time limit
        found = canonical.search(arrays, target, time.monotonic() + remaining() * CANONICAL_SLICE)
        refuted = found.exhausted
        if offer(found.offsets, "canonical"):
            return _finish(start, arrays, best, solver, bound, optimal)
    # 1. skyline branch and bound at the target, a short slice in process
    slice_end = time.monotonic() + min(max(remaining() * SKYLINE_SLICE, 0.0), SKYLINE_SLICE_MAX)
    if not refuted:
        first = skyline.search(arrays, target, slice_end, order="size", infer=len(arrays) <= INFER_MAX)
        refuted = first.exhausted
        offer(first.offsets, "skyline")
    if best.peak > target and not refuted and remaining() > 0:
        # 2. the skyline as a greedy (first leaf, no useful bound) when the target was missed
        # on large graphs the size order never beat the area order (S_1: +2.4 % vs +0.18 %)
        orders = ("area",) if len(arrays) > LARGE_GRAPH else ("area", "size")
        for order in orders:
            if remaining() <= 0 or best.peak <= target:
                break
            nodes = _leaf_nodes(arrays)
            leaf = skyline.search(arrays, best.peak - 1, deadline, order=order, infer=False, node_limit=nodes)
            offer(leaf.offsets, f"skyline-greedy-{order}")
    if best.peak > target and remaining() > 0 and cpsat.available():
        sections = cpsat.maximal_sections(arrays)
        if sections is not None:
            job = cpsat.Job(arrays, sections, best, bound, target, deadline, progress)
            optimal = _portfolio(job, offer, refuted)
    return _finish(start, arrays, best, solver, bound, optimal)


def _finish(start: Packing, arrays: Arrays, best: Best, solver: str, bound: int, optimal: bool) -> Packing:
    """The better of `start` and the best packing found, validated."""
    if best.peak >= start.peak:
        return replace(start, optimal=optimal and best.peak == start.peak)
    offsets = tuple(int(x) for x in best.offsets)
    try:
        validate(start.buffers, offsets)
    except InvalidPackingError:  # pragma: no cover - a solver bug must never leak out
        return start
    return Packing(start.buffers, offsets, solver=solver, optimal=best.peak <= bound or optimal)


def _leaf_nodes(arrays: Arrays) -> int:
    """A node budget for the greedy skyline: a few times the buffer count."""
    return 4 * len(arrays) + 1000


def _portfolio(job: cpsat.Job, offer: Callable[[IntArray | None, str], bool], refuted: bool) -> bool:
    """CP-SAT here, the skyline branch and bound in a forked child (when worth it)."""
    child = None
    deadline = job.deadline
    if not refuted and deadline - time.monotonic() > PARALLEL_MIN_SECONDS and len(job.arrays) <= INFER_MAX:
        child = _Child.start(job.arrays, job.target, deadline)
    stop_flag = job.stop = threading.Event()
    watcher = None
    if child is not None:
        watcher = threading.Thread(target=child.wait, args=(stop_flag, deadline), daemon=True)
        watcher.start()
    try:
        optimal = cpsat.solve(job, refuted)
    finally:
        stop_flag.set()
        if watcher is not None:
            watcher.join()
        if child is not None:
            child.close()
    if child is not None and child.result is not None:
        offer(child.result, "skyline")
    return optimal


class _Child:
    """The skyline branch and bound in a forked process, its answer read through a pipe."""

    def __init__(self, proc: Any, conn: Any) -> None:
        self.proc = proc
        self.conn = conn
        self.result: IntArray | None = None

    @staticmethod
    def start(arrays: Arrays, target: int, deadline: float) -> _Child | None:
        import multiprocessing as mp

        try:
            ctx = mp.get_context("fork")
        except ValueError:  # pragma: no cover - no fork on this platform
            return None
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child_main, args=(arrays, target, deadline, child), daemon=True)
        proc.start()
        child.close()
        return _Child(proc, parent)

    def wait(self, stop: threading.Event, deadline: float) -> None:
        """Until `stop` or the deadline: take the child's packing, then stop the CP-SAT run."""
        while not stop.is_set() and time.monotonic() < deadline:
            if self.conn.poll(0.05):
                try:
                    data = self.conn.recv()
                except (EOFError, OSError):
                    return
                if data is not None:
                    self.result = np.asarray(data, np.int64)
                    stop.set()
                    STOPPERS.stop_all()
                return

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join(1.0)
        self.conn.close()


def _child_main(arrays: Arrays, target: int, deadline: float, conn: Any) -> None:
    """Child process: the branch and bound by area order (the in-process slice used size order)."""
    r = skyline.search(arrays, target, deadline, order="area")
    result = r.offsets
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send(None if result is None else result.tolist())
