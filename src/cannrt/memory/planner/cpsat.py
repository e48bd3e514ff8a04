"""Exact search with CP-SAT (OR-Tools) over maximal cliques.

Lifetimes are fixed, so two buffers conflict exactly when they share a time section; the buffers
live in one maximal section must lie side by side in the address space. The model is one
1-D no-overlap constraint per maximal section (strong propagation: each is a bin of the
capacity), with the best packing so far as a hint. Without OR-Tools the other solvers stand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cannrt.memory.planner.buffers import Arrays, IntArray, Progress, per_section, section_index, unit_of

SEARCH_WORKERS = 2
MAX_CLIQUE_TERMS = 3_000_000
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
    times, first, last = section_index(arrays.lower[live], arrays.upper[live])
    members = per_section(first, last, np.ones(live.shape[0], np.int64), len(times))
    starts = np.zeros(len(times) + 1, bool)
    starts[first] = True
    ends = np.zeros(len(times) + 1, bool)
    ends[last] = True
    maximal = np.flatnonzero(starts[:-1] & ends[1:])
    if int(members[maximal].sum()) > max_terms:
        return None
    return [live[(first <= k) & (last > k)] for k in maximal.tolist()]


@dataclass
class Best:
    """The best packing seen so far, shared with the solver callback."""

    offsets: IntArray
    peak: int


class _StopRegistry:
    """Running CP-SAT solvers that a finished child should stop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.solvers: list[Any] = []

    def stop_all(self) -> None:
        with self.lock:
            for s in self.solvers:
                s.stop_search()


STOPPERS = _StopRegistry()


@dataclass
class Job:
    """One exact search: buffers, their maximal sections, the best packing so far (updated in
    place), the lower bound, the target peak, the deadline, progress reports and a stop flag."""

    arrays: Arrays
    sections: Sequence[IntArray]
    best: Best
    bound: int
    target: int
    deadline: float
    progress: Progress | None = None
    stop: threading.Event | None = None

    def stopped(self) -> bool:
        """True once the deadline passed or someone set the stop flag."""
        return time.monotonic() >= self.deadline or (self.stop is not None and self.stop.is_set())


def solve(job: Job, refuted: bool = False) -> bool:
    """Decide `peak <= target` first; when that is refuted, minimise the peak from the hint.
    True when the best peak is proven minimal."""
    if not refuted:
        status = _phase(job, False)
        if status != "infeasible" or job.best.peak <= job.target:
            return job.best.peak <= job.bound
    if job.stop is not None and job.stop.is_set():
        return False
    return _phase(job, True) == "optimal"


def _phase(job: Job, minimise: bool) -> str:
    """One CP-SAT run: feasibility at the target, or minimisation below the best peak."""
    from ortools.sat.python import cp_model

    arrays, best, bound, target = job.arrays, job.best, job.bound, job.target
    unit = unit_of(arrays, target)
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
    for section in job.sections:
        model.add_no_overlap([intervals[i] for i in section.tolist()])
    # place the buffer with the lowest feasible offset there, the larger first on ties
    order = np.argsort(-arrays.size, kind="stable")
    model.add_decision_strategy(
        [ks[i][0] for i in order.tolist()],
        cp_model.CHOOSE_LOWEST_MIN,
        cp_model.SELECT_MIN_VALUE,
    )
    if peak is not None:
        model.minimize(peak)
    if job.stopped():
        return "unknown"  # building the model used the time
    return _run(job, model, ks, unit)


def _run(job: Job, model: Any, ks: list[tuple[Any, int]], unit: int) -> str:
    """Solve, recording improving packings in job.best: 'optimal', 'infeasible' or 'unknown'."""
    from ortools.sat.python import cp_model

    began = time.monotonic()
    best, sizes = job.best, job.arrays.size

    class Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            offsets = np.array([self.value(k) * a * unit for k, a in ks], np.int64)
            value = int((offsets + sizes).max(initial=0))
            if value < best.peak:
                best.offsets, best.peak = offsets, value
                if job.progress is not None:
                    job.progress(time.monotonic() - began, value)
            if value <= job.target:
                self.stop_search()

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(job.deadline - time.monotonic(), 0.01)
    solver.parameters.num_workers = SEARCH_WORKERS if job.stop is None else 1
    with STOPPERS.lock:
        STOPPERS.solvers.append(solver)
        stopped = job.stop is not None and job.stop.is_set()
    try:
        if stopped:
            return "unknown"
        status = solver.solve(model, Recorder())
    finally:
        with STOPPERS.lock:
            STOPPERS.solvers.remove(solver)
    if status == cp_model.OPTIMAL:
        return "optimal"
    return "infeasible" if status == cp_model.INFEASIBLE else "unknown"
