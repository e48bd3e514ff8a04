"""The thread team (kernels/nn/team.py): loops run parallel where a team may start and serially
where it may not (a forked child, no thread-safe threading layer, a thread other than the one
that leads the teams), with the same numbers; two threads may run loops at once (two devices'
workers)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from cannrt.kernels.nn import team
from cannrt.kernels.nn.conv import convolve_into
from cannrt.kernels.nn.window import Window

WINDOW = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))


def _conv(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 32, 40, 40)).astype(np.float32)
    w = rng.standard_normal((48, 32, 3, 3)).astype(np.float32)
    y = np.empty((1, 48, 40, 40), np.float32)
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))
    return x, y


def _child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    before = team.TEAMS[0]
    _, y = _conv(1)
    queue.put((y, team.TEAMS[0] - before))


def test_a_process_forked_after_a_team_ran_computes_serially_and_does_not_hang() -> None:
    """GNU OpenMP's threads do not survive a fork: a team started in the child would hang."""
    before = team.TEAMS[0]
    _, expected = _conv(1)
    assert team.TEAMS[0] == before + 1
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,), daemon=True)
    child.start()
    try:
        y, teams = queue.get(timeout=120)
        child.join(timeout=60)
    finally:
        child.kill()
    assert child.exitcode == 0 and teams == 0
    assert y.tobytes() == expected.tobytes()


def test_without_a_thread_safe_layer_loops_run_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    _, expected = _conv(2)
    monkeypatch.setitem(team._state, "usable", False)
    before = team.TEAMS[0]
    _, y = _conv(2)
    assert team.TEAMS[0] == before and y.tobytes() == expected.tobytes()


def test_the_crowded_rule_needs_a_long_wait_off_the_core() -> None:
    assert team.crowded(wall=0.01, off_core=0.005)
    assert not team.crowded(wall=0.01, off_core=0.002)  # on its core for 80 % of the call
    assert not team.crowded(wall=0.0012, off_core=0.0009)  # shorter than CROWDED_MIN_S: a preemption


def test_one_thread_leads_the_teams_and_the_others_run_their_loops_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    """GNU OpenMP keeps a pool of threads per thread that starts teams: a second pool would give
    it more threads than cores, and it then cuts every spin wait short (a futex wake per team)."""
    monkeypatch.setitem(team._state, "leader", None)
    before = team.TEAMS[0]
    _, expected = _conv(5)
    assert team.TEAMS[0] == before + 1 and team._state["leader"] is threading.current_thread()
    results: list[np.ndarray] = []
    other = threading.Thread(target=lambda: results.append(_conv(5)[1]))
    other.start()
    other.join(timeout=120)
    assert team.TEAMS[0] == before + 1 and results[0].tobytes() == expected.tobytes()


def test_when_the_leader_has_ended_the_next_thread_to_start_a_team_leads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread's pool ends with the thread: the leadership is free again."""
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    monkeypatch.setitem(team._state, "leader", ended)
    before = team.TEAMS[0]
    _conv(6)
    assert team.TEAMS[0] == before + 1 and team._state["leader"] is threading.current_thread()


def test_a_thread_that_never_leads_runs_its_loops_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device's worker says so when it starts: it runs work while the host is busy."""
    _, expected = _conv(7)
    monkeypatch.setitem(team._state, "leader", None)
    before = team.TEAMS[0]
    results: list[np.ndarray] = []

    def run() -> None:
        team.never_lead()
        results.append(_conv(7)[1])

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=120)
    assert team.TEAMS[0] == before and team._state["leader"] is None
    assert results[0].tobytes() == expected.tobytes()


def test_two_threads_run_loops_at_once() -> None:
    expected = {seed: _conv(seed)[1] for seed in (3, 4)}
    results: dict[int, list[np.ndarray]] = {3: [], 4: []}

    def run(seed: int) -> None:
        for _ in range(20):
            results[seed].append(_conv(seed)[1])

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for seed, ys in results.items():
        assert len(ys) == 20 and all(y.tobytes() == expected[seed].tobytes() for y in ys)


def test_where_no_thread_safe_layer_loads_loops_run_serially() -> None:
    """numba's chosen layer cannot load (here TBB, its pool module hidden): the first team's
    start raises, and the loops run serially from then on."""
    pytest.importorskip("numba")
    program = (
        "import sys\n"
        "sys.modules['numba.np.ufunc.tbbpool'] = None  # its import fails, as where TBB is missing\n"
        "import numpy as np\n"
        "from cannrt.kernels.nn import team\n"
        "from cannrt.kernels.nn.conv import convolve_into\n"
        "from cannrt.kernels.nn.window import Window\n"
        "x = np.ones((1, 32, 40, 40), np.float32); w = np.ones((48, 32, 3, 3), np.float32)\n"
        "y = np.empty((1, 48, 40, 40), np.float32)\n"
        "for _ in range(2):\n"
        "    convolve_into(x, w, None, 1, Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)), y, (0, 0.0, 0.0))\n"
        "print(team._state['usable'], team.TEAMS[0], y[0, 0, 5, 5], y[0, 0, 0, 0])\n"
    )
    env = {**os.environ, "NUMBA_THREADING_LAYER": "tbb"}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "0", "288.0", "128.0"]


def test_a_crowded_team_sends_the_next_loops_to_their_serial_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU clock that never advances: the caller was off its core for the whole call (as when
    other processes hold the cores, or its team shares its core), whatever this machine's load."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    y = np.empty((1, 64, 56, 56), np.float32)
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))  # compiled or loaded: later calls are judged
    team.reset_backoff()
    monkeypatch.setattr(team, "thread_clock", lambda: 0.0)
    monkeypatch.setattr(team, "CROWDED_MIN_S", 1e-4)  # a fast machine: the call may take under 1 ms
    teams, crowded = team.TEAMS[0], team.CROWDED[0]
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))  # 1-2 ms: longer than team.CROWDED_MIN_S
    assert team.TEAMS[0] == teams + 1 and team.CROWDED[0] == crowded + 1
    expected = y.copy()
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))  # backed off: serial, the same numbers
    assert team.TEAMS[0] == teams + 1 and y.tobytes() == expected.tobytes()
    team._backoff[0] = 1e-9  # the back-off ran out: a team again, crowded again, a longer back-off
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))
    assert team.TEAMS[0] == teams + 2 and team._backoff[1] == 2 * team.BACKOFF_MIN_S
    monkeypatch.setattr(team, "thread_clock", time.perf_counter)  # on its core throughout
    team._backoff[0] = 1e-9
    convolve_into(x, w, None, 1, WINDOW, y, (0, 0.0, 0.0))
    assert team.TEAMS[0] == teams + 3 and team._backoff == [0.0, team.BACKOFF_MIN_S]
