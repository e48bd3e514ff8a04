"""Every op test starts with the kernels' helper thread and thread team trusted: a stall or a
crowded team on the loaded test machine (kernels/nn/blas.py and team.py back off after one)
never decides whether a later test's kernel is shared between the host threads. A test that
counts teams on the device takes `host_runs_kernels`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import cannrt
from cannrt.kernels.nn import blas, team
from cannrt.runtime.core import Runtime


@pytest.fixture(autouse=True)
def _helper_thread_trusted() -> Iterator[None]:
    blas.reset_backoff()
    team.reset_backoff()
    yield


@pytest.fixture
def host_runs_kernels(rt: Runtime) -> Runtime:
    """rt with device 0's worker stopped: every kernel runs on the host thread that waits for it.
    The worker runs kernels while the host is busy (a first launch's set-up may take it more than
    the worker's quiet time), serially: its loops never start a team (kernels/nn/team.py)."""
    cannrt.Device(0)
    rt.driver._npu(0).executor.stop()
    return rt
