"""`cannrt plan`: prints the report, writes solutions, and fails with a message, not a trace."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from cannrt.cli.plan import register
from cannrt.memory.planner.csvio import read_solution

runner = CliRunner()
PROBLEM = "id,lower,upper,size\na,0,4,8\nb,2,6,8\nc,5,9,16\n"


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps `plan` a named subcommand
        """Unused."""

    return app


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_plan_prints_peak_bound_and_time(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["plan", str(_write(tmp_path, "p.csv", PROBLEM))])
    assert result.exit_code == 0, result.output
    for label in ("peak", "lower bound", "over bound", "time", "buffers"):
        assert label in result.stdout
    assert "0.000 %" in result.stdout


def test_plan_writes_the_solution_csv(tmp_path: Path) -> None:
    out = tmp_path / "sol.csv"
    args = ["plan", str(_write(tmp_path, "p.csv", PROBLEM)), "--out", str(out)]
    assert runner.invoke(_app(), args).exit_code == 0
    buffers, offsets = read_solution(out)
    assert [b.id for b in buffers] == ["a", "b", "c"] and len(offsets) == 3


def test_bad_input_exits_nonzero_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", PROBLEM + "d,3,x,4\n")
    result = runner.invoke(_app(), ["plan", str(path)])
    assert result.exit_code == 1
    assert "bad.csv:5" in result.output and "not an integer" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_capacity_below_the_bound_is_reported(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["plan", str(_write(tmp_path, "p.csv", PROBLEM)), "--capacity", "10"])
    assert result.exit_code == 1
    assert "does not fit: lower bound 24 > capacity 10" in result.output


def test_capacity_comes_from_the_file_name(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["plan", str(_write(tmp_path, "p.10.csv", PROBLEM))])
    assert result.exit_code == 1
    assert "capacity 10" in result.output


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["plan", str(tmp_path / "nope.csv")])
    assert result.exit_code == 1
    assert "cannot read file" in result.output
