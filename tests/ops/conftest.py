"""Every op test starts with the kernels' helper thread and thread team trusted: a stall or a
crowded team on the loaded test machine (kernels/nn/blas.py and team.py back off after one)
never decides whether a later test's kernel is shared between the host threads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cannrt.kernels.nn import blas, team


@pytest.fixture(autouse=True)
def _helper_thread_trusted() -> Iterator[None]:
    blas.reset_backoff()
    team.reset_backoff()
    yield
