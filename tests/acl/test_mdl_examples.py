"""The examples/acl/model programs (unmodified pyACL programs) run through `cannrt exec`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from acl_harness import EXAMPLES, cannrt_exec
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from hand_models import K, M, dense_model, reference, weights

from cannrt.cli.app import app
from cannrt.om import format as om_format

PROGRAMS = EXAMPLES / "model"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("om") / "dense.om"
    om_format.save(dense_model(streams=2), path)
    return path


def test_quick_start_prints_the_top5_of_the_real_output(model_file: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(7).standard_normal((M, K)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run = cannrt_exec(PROGRAMS / "quick_start.py", str(model_file), str(tmp_path / "x.npy"), cwd=tmp_path)
    assert run.returncode == 0, run.explain()
    scores = reference(x, *weights())[0].ravel()
    expected = [f"top {r + 1}: class {i}, score {scores[i]:.6f}" for r, i in enumerate(np.argsort(-scores)[:5])]
    lines = run.stdout.splitlines()
    assert "output y0: dims [4, 16]" in lines
    assert [line for line in lines if line.startswith("top ")] == expected
    assert lines[-1] == "done"


def test_async_callback_reports_every_batch(model_file: Path, tmp_path: Path) -> None:
    run = cannrt_exec(PROGRAMS / "async_callback.py", str(model_file), "4", cwd=tmp_path)
    assert run.returncode == 0, run.explain()
    rng = np.random.default_rng(0)
    expected = []
    for batch in range(4):
        scores = reference(rng.standard_normal((M, K)).astype(np.float32), *weights())[0].ravel()
        expected.append(f"batch {batch}: top class {int(np.argmax(scores))}, max {float(scores.max()):.6f}")
    assert [line for line in run.stdout.splitlines() if line.startswith("batch")] == expected
    assert run.stdout.splitlines()[-1] == "done"


def test_acllite_style_wrapper(model_file: Path, tmp_path: Path) -> None:
    run = cannrt_exec(PROGRAMS / "acllite_style.py", str(model_file), cwd=tmp_path)
    assert run.returncode == 0, run.explain()
    x = np.random.default_rng(0).standard_normal((M, K)).astype(np.float32)
    sums = [float(y.astype(np.float64).sum()) for y in reference(x, *weights())]
    want = f"dynamic False, output 0 (4, 16) sum {sums[0]:.6f}, output 1 (4, 16) sum {sums[1]:.6f}"
    assert run.stdout.splitlines()[:2] == [f"run 0: {want}", f"run 1: {want}"]


def test_a_bad_model_file_fails_with_the_acl_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"IMOD" + bytes(600))
    run = cannrt_exec(PROGRAMS / "quick_start.py", str(bad), cwd=tmp_path)
    assert run.returncode != 0
    assert "acl.mdl.load_from_file failed ret=100012" in run.stderr


def test_quick_start_on_squeezenet_compiled_by_cannrt_atc(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    import light_models

    model = light_models.load("squeezenet")
    onnx_path = tmp_path / "squeezenet.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    feeds = light_models.input_for(model)
    (x,) = feeds.values()
    np.save(tmp_path / "x.npy", x)
    atc = CliRunner().invoke(
        app, ["atc", f"--model={onnx_path}", "--framework=5", f"--output={tmp_path / 'squeezenet'}",
              "--soc_version=Ascend910B1", "--precision_mode=force_fp32"],
    )  # fmt: skip
    assert atc.exit_code == 0, atc.output
    run = cannrt_exec(PROGRAMS / "quick_start.py", str(tmp_path / "squeezenet.om"), str(tmp_path / "x.npy"))
    assert run.returncode == 0, run.explain()
    scores = light_models.run_onnxruntime(model, feeds)[0].ravel()
    top = [int(line.split()[3].rstrip(",")) for line in run.stdout.splitlines() if line.startswith("top ")]
    assert top == [int(i) for i in np.argsort(-scores)[:5]]
