"""Helpers for the pyACL facade tests: running programs through `cannrt exec` in child processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
EXAMPLES = ROOT / "examples" / "acl"
EXEC_TIMEOUT_S = 120


@dataclass(frozen=True)
class Run:
    """What a child process did."""

    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without cannrt settings (programs see the default 2 x Ascend910B1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANNRT_")}
    env.update(extra)
    return env


def cannrt_exec(
    script: Path | str,
    *args: str,
    command: Sequence[str] | None = None,
    stdin: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Run:
    """Run `cannrt exec script args...` (by default as `python -m cannrt exec`)."""
    base = list(command) if command else [sys.executable, "-m", "cannrt", "exec"]
    done = subprocess.run(
        [*base, str(script), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=EXEC_TIMEOUT_S,
        env=env or clean_env(),
        cwd=cwd,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def program_names() -> list[str]:
    """Conformance programs (tests/acl/programs/prog_*.py)."""
    return sorted(p.stem for p in PROGRAMS.glob("prog_*.py"))


def example_names() -> list[str]:
    """User examples (examples/acl/*.py)."""
    return sorted(p.stem for p in EXAMPLES.glob("*.py"))
