"""The conformance suite: pyACL programs (tests/acl/programs) and the user examples (examples/acl)
run unmodified through `cannrt exec`; each must exit 0 and say PASS (programs) or finish its story
(examples)."""

from __future__ import annotations

import pytest
from acl_harness import Run, example_names, program_names


@pytest.mark.parametrize("name", program_names())
def test_conformance_program_passes_through_cannrt_exec(name: str, program_runs: dict[str, Run]) -> None:
    run = program_runs[name]
    assert run.returncode == 0, run.explain()
    assert f"PASS {name.removeprefix('prog_')}" in run.stdout, run.explain()
    assert "Traceback" not in run.stderr, run.explain()


@pytest.mark.parametrize("name", example_names())
def test_example_runs_through_cannrt_exec(name: str, program_runs: dict[str, Run]) -> None:
    run = program_runs[f"example:{name}"]
    assert run.returncode == 0, run.explain()
    assert "done" in run.stdout.lower(), run.explain()
    assert "Traceback" not in run.stderr, run.explain()


def test_the_suite_has_programs_and_examples() -> None:
    assert len(program_names()) >= 10
    assert len(example_names()) >= 4
