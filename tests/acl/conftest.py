"""Fixtures for the pyACL facade: every conformance program and example run through `cannrt exec`
in child processes (several at once). The in-process `acl` fixture is in tests/conftest.py."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from acl_harness import EXAMPLES, PROGRAMS, Run, cannrt_exec, example_names, program_names

PARALLEL = 4


@pytest.fixture(scope="session")
def program_runs() -> dict[str, Run]:
    """Every conformance program and example, run through cannrt exec, a few at a time."""
    jobs = {name: PROGRAMS / f"{name}.py" for name in program_names()}
    jobs.update({f"example:{name}": EXAMPLES / f"{name}.py" for name in example_names()})
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {name: pool.submit(cannrt_exec, path, cwd=path.parent) for name, path in jobs.items()}
        return {name: future.result() for name, future in futures.items()}
