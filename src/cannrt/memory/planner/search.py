"""Exact search below the greedy peak: a CP-SAT model (OR-Tools) over maximal cliques.

Lifetimes are fixed, so two buffers conflict exactly when they share a time section; the buffers
live in one maximal section must lie side by side in the address space. The model is one
1-D no-overlap constraint per maximal section (strong propagation: each is a bin of the
capacity), with the greedy packing as a hint. Without OR-Tools the greedy packing is returned.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cannrt.memory.planner import canonical, skyline
from cannrt.memory.planner.buffers import (
    Arrays,
    IntArray,
    InvalidPackingError,
    Packing,
    validate,
)

Progress = Callable[[float, int], None]
SEARCH_WORKERS = 2
USE_NO_OVERLAP_2D = False
LOWEST_FIRST = True
MAX_CLIQUE_TERMS = 3_000_000
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
"""Above this many (buffer, section) memberships the model is too big to pay off."""


def available() -> bool:
    """True when OR-Tools' CP-SAT can be imported."""
    try:
        import ortools.sat.python.cp_model  # noqa: F401
    except ImportError:
        return False
    return True


def maximal_sections(arrays: Arrays, max_terms: int = MAX_CLIQUE_TERMS) -> list[IntArray] | None:
    """Buffers live in each maximal time section (the maximal cliques of the conflict graph).

    Section k = [times[k], times[k+1]) is maximal when a buffer starts at k (else its set is
    inside section k-1's) and one ends at k+1 (else inside section k+1's). None when the
    sections hold more than `max_terms` memberships in total.
    """
    live = np.flatnonzero(arrays.size > 0)
    times = np.unique(np.concatenate([arrays.lower[live], arrays.upper[live]]))
    first = np.searchsorted(times, arrays.lower[live])
    last = np.searchsorted(times, arrays.upper[live])  # exclusive section index
    delta = np.zeros(len(times) + 1, np.int64)
    np.add.at(delta, first, 1)
    np.add.at(delta, last, -1)
    starts = np.zeros(len(times) + 1, bool)
    starts[first] = True
    ends = np.zeros(len(times) + 1, bool)
    ends[last] = True
    maximal = np.flatnonzero(starts[:-1] & ends[1:])
    if int(np.cumsum(delta)[maximal].sum()) > max_terms:
        return None
    return [live[(first <= k) & (last > k)] for k in maximal.tolist()]


@dataclass
class _Best:
    """The best packing seen so far, shared with the solver callback."""

    offsets: IntArray
    peak: int


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
    best = _Best(np.asarray(start.offsets, np.int64), start.peak)
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
            deadline += canonical.warm_up()
        found = canonical.search(arrays, target, time.monotonic() + remaining() * CANONICAL_SLICE)
        refuted = found.exhausted
        if offer(found.offsets, "canonical"):
            return _finish(start, arrays, best, solver, bound, optimal)
    # 1. skyline branch and bound at the target, a short slice in process
    slice_end = time.monotonic() + min(max(remaining() * SKYLINE_SLICE, 0.0), SKYLINE_SLICE_MAX)
    if not refuted:
        first = skyline.search(arrays, target, slice_end, order="size", infer=len(arrays) <= INFER_MAX)
        refuted = first.exhausted and first.offsets is None
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
    if best.peak > target and remaining() > 0 and available():
        sections = maximal_sections(arrays)
        if sections is not None:
            optimal = _portfolio(arrays, sections, best, bound, target, deadline, progress, offer, refuted)
    return _finish(start, arrays, best, solver, bound, optimal)


def _finish(start: Packing, arrays: Arrays, best: _Best, solver: str, bound: int, optimal: bool) -> Packing:
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


def _portfolio(
    arrays: Arrays,
    sections: Sequence[IntArray],
    best: _Best,
    bound: int,
    target: int,
    deadline: float,
    progress: Progress | None,
    offer: Callable[[IntArray | None, str], bool],
    refuted: bool,
) -> bool:
    """CP-SAT here, the skyline branch and bound in a forked child (when worth it)."""
    child = None
    if not refuted and deadline - time.monotonic() > PARALLEL_MIN_SECONDS and len(arrays) <= INFER_MAX:
        child = _Child.start(arrays, target, deadline)
    stop_flag = threading.Event()
    watcher = None
    if child is not None:
        watcher = threading.Thread(target=child.wait, args=(stop_flag, deadline), daemon=True)
        watcher.start()
    try:
        optimal = _solve(arrays, sections, best, bound, target, deadline, progress, stop_flag, refuted)
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
                    _STOPPERS.stop_all()
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


class _StopRegistry:
    """Running CP-SAT solvers that a finished child should stop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.solvers: list[Any] = []

    def stop_all(self) -> None:
        with self.lock:
            for s in self.solvers:
                s.stop_search()


_STOPPERS = _StopRegistry()


def _unit(arrays: Arrays, target: int) -> int:
    """Largest unit dividing every size, every alignment above 1 and the target.

    Normalised packings (each buffer pushed down onto another or 0) then have every offset a
    multiple of the unit, so solving in units loses nothing.
    """
    aligns = arrays.alignment[arrays.alignment > 1]
    g = int(np.gcd.reduce(np.concatenate([arrays.size, aligns, [target]])))
    return max(g, 1)


def _solve(
    arrays: Arrays,
    sections: Sequence[IntArray],
    best: _Best,
    bound: int,
    target: int,
    deadline: float,
    progress: Progress | None,
    stop: threading.Event | None = None,
    refuted: bool = False,
) -> bool:
    """Decide `peak <= target` first; when that is refuted, minimise the peak from the hint."""
    if not refuted:
        status = _phase(arrays, sections, best, bound, target, deadline, progress, False, stop)
        if status != "infeasible" or best.peak <= target:
            return best.peak <= bound
    if stop is not None and stop.is_set():
        return False
    status = _phase(arrays, sections, best, bound, target, deadline, progress, True, stop)
    return status == "optimal"


def _phase(
    arrays: Arrays,
    sections: Sequence[IntArray],
    best: _Best,
    bound: int,
    target: int,
    deadline: float,
    progress: Progress | None,
    minimise: bool,
    stop: threading.Event | None = None,
) -> str:
    """One CP-SAT run: feasibility at `target`, or minimisation below the best peak."""
    from ortools.sat.python import cp_model

    unit = _unit(arrays, target)
    size = arrays.size // unit
    model = cp_model.CpModel()
    top = (best.peak if minimise else target) // unit
    peak = model.new_int_var(-(-bound // unit), top, "peak") if minimise else None
    ks: list[tuple[Any, int]] = []
    intervals: list[Any] = []
    for i in range(len(arrays)):
        align = max(int(arrays.alignment[i]) // unit, 1)
        k = model.new_int_var(0, max(top - int(size[i]), 0) // align, f"k{i}")
        ks.append((k, align))
        intervals.append(model.new_fixed_size_interval_var(k * align, int(size[i]), f"y{i}"))
        if peak is not None:
            model.add(k * align + int(size[i]) <= peak)
            model.add_hint(k, int(best.offsets[i]) // unit // align)
    for section in sections:
        model.add_no_overlap([intervals[i] for i in section.tolist()])
    if USE_NO_OVERLAP_2D:
        times = [
            model.new_fixed_size_interval_var(int(lo), int(up - lo), f"t{i}")
            for i, (lo, up) in enumerate(zip(arrays.lower, arrays.upper, strict=True))
        ]
        model.add_no_overlap_2d(times, intervals)
    if LOWEST_FIRST:
        order = np.argsort(-arrays.size, kind="stable")  # ties: the larger buffer first
        model.add_decision_strategy(
            [ks[i][0] for i in order.tolist()],
            cp_model.CHOOSE_LOWEST_MIN,
            cp_model.SELECT_MIN_VALUE,
        )
    if peak is not None:
        model.minimize(peak)
    if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
        return "unknown"  # building the model used the time
    return _run(model, ks, unit, arrays.size, best, target, deadline, progress, stop)


def _run(
    model: Any,
    ks: list[tuple[Any, int]],
    unit: int,
    sizes: IntArray,
    best: _Best,
    target: int,
    deadline: float,
    progress: Progress | None,
    stop: threading.Event | None = None,
) -> str:
    """Solve, recording improving packings in `best`: 'optimal', 'infeasible' or 'unknown'."""
    from ortools.sat.python import cp_model

    began = time.monotonic()

    class Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            offsets = np.array([self.value(k) * a * unit for k, a in ks], np.int64)
            value = int((offsets + sizes).max(initial=0))
            if value < best.peak:
                best.offsets, best.peak = offsets, value
                if progress is not None:
                    progress(time.monotonic() - began, value)
            if value <= target:
                self.stop_search()

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(deadline - time.monotonic(), 0.01)
    solver.parameters.num_workers = SEARCH_WORKERS if stop is None else 1
    with _STOPPERS.lock:
        _STOPPERS.solvers.append(solver)
        stopped = stop is not None and stop.is_set()
    try:
        if stopped:
            return "unknown"
        status = solver.solve(model, Recorder())
    finally:
        with _STOPPERS.lock:
            _STOPPERS.solvers.remove(solver)
    if status == cp_model.OPTIMAL:
        return "optimal"
    return "infeasible" if status == cp_model.INFEASIBLE else "unknown"
