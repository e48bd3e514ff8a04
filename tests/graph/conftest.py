"""Fixtures of the graph tests: `acl`, the pyACL facade initialised on a fresh runtime, for the
tests that run compiled models through acl.mdl and acl.op."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

import cannrt
from cannrt.acl._state import STATE
from cannrt.config import Settings


@pytest.fixture
def acl() -> Iterator[ModuleType]:
    """cannrt.acl initialised on a fresh default runtime with device 0 set; finalized afterwards."""
    import cannrt.acl as facade

    if STATE.initialized:
        facade.finalize()
    cannrt.reset_runtime(Settings())
    assert facade.init() == 0
    assert facade.rt.set_device(0) == 0
    try:
        yield facade
    finally:
        if STATE.initialized:
            facade.finalize()
