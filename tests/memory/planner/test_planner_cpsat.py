"""CP-SAT (the portfolio's exact minimiser): feasibility at a target, then minimisation when the
target is refuted; improving packings land in the shared best packing."""

from __future__ import annotations

import threading
import time

import numpy as np

from cannrt.memory.planner import Buffer, greedy, validate
from cannrt.memory.planner.buffers import Arrays
from cannrt.memory.planner.cpsat import Best, Job, maximal_sections, solve

# greedy leaves a gap here; the optimum is the lower bound, 9
TRICKY = [Buffer("0", 2, 5, 3), Buffer("1", 1, 4, 3), Buffer("2", 2, 4, 3), Buffer("3", 4, 7, 4)]


def _job(buffers: list[Buffer], bound: int, target: int) -> Job:
    arrays = Arrays.of(buffers)
    start = greedy(buffers)
    sections = maximal_sections(arrays)
    assert sections is not None
    best = Best(np.asarray(start.offsets, np.int64), start.peak)
    return Job(arrays, sections, best, bound, target, time.monotonic() + 30)


def test_a_feasible_target_is_reached_and_the_packing_validates() -> None:
    job = _job(TRICKY, 9, 9)
    assert job.best.peak > 9
    assert solve(job)
    assert job.best.peak == 9
    assert validate(TRICKY, [int(x) for x in job.best.offsets], 9) == 9


def test_a_refuted_target_turns_into_a_proven_minimum() -> None:
    job = _job(TRICKY, 8, 8)  # claim a bound of 8: the target is infeasible, the minimum is 9
    assert solve(job)
    assert job.best.peak == 9


def test_a_stop_flag_set_before_the_run_gives_no_verdict() -> None:
    job = _job(TRICKY, 9, 9)
    job.stop = threading.Event()
    job.stop.set()
    assert not solve(job, refuted=True)
    assert job.best.peak == greedy(TRICKY).peak
