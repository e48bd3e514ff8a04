"""Fixtures for the pyACL facade: in-process `acl` with a fresh runtime, and every conformance
program and example run through `cannrt exec` in child processes (several at once)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import pytest
from acl_harness import EXAMPLES, PROGRAMS, Run, cannrt_exec, example_names, program_names

import cannrt
from cannrt.acl._state import STATE
from cannrt.config import Settings

PARALLEL = 4


@pytest.fixture(scope="session")
def program_runs() -> dict[str, Run]:
    """Every conformance program and example, run through cannrt exec, a few at a time."""
    jobs = {name: PROGRAMS / f"{name}.py" for name in program_names()}
    jobs.update({f"example:{name}": EXAMPLES / f"{name}.py" for name in example_names()})
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {name: pool.submit(cannrt_exec, path, cwd=path.parent) for name, path in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


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
