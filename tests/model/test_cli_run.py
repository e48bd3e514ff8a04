"""`cannrt run`: runs a model once and reports; bad input is one line and a non-zero exit."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from hand_models import K, M, dense_model
from typer.testing import CliRunner

from cannrt.cli.app import app
from cannrt.om import format as om_format

runner = CliRunner()


def test_run_prints_shapes_times_and_memory(rt, tmp_path: Path) -> None:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(), path)
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert "output y0: shape (4, 16) float32" in result.output
    assert "device time (modelled):" in result.output and "wall time:" in result.output
    assert "feature maps: planned 1,024 B" in result.output and "lower bound 512 B" in result.output


def test_run_with_input_files_and_profile(rt, tmp_path: Path) -> None:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(), path)
    x = np.full((M, K), 0.25, np.float32)
    np.save(tmp_path / "x.npy", x)
    result = runner.invoke(app, ["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--profile", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "profile:" in result.output
    (summary,) = tmp_path.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    rows = list(csv.DictReader(summary.open()))
    assert [(r["Op Name"], r["OP Type"]) for r in rows] == [
        ("MatMul_0", "MatMul"),
        ("Relu_2", "Relu"),
        ("Add_1", "Add"),
        ("Relu_3", "Relu"),
    ]


def test_run_bad_input_is_one_line(rt, tmp_path: Path) -> None:
    broken = tmp_path / "broken.om"
    broken.write_bytes(b"\0" * 10)
    for args in (["run", str(broken)], ["run", str(tmp_path / "absent.om")], ["run", str(broken), "--compare", "x"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output
