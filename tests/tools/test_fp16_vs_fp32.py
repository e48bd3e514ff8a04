"""An fp16 run of a small pipeline compared with its fp32 run: the op where a planted overflow
first appears is named by msprobe's verdict rule, and so is the first op that produced Inf."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import cannrt
from cannrt.cli.app import app
from cannrt.tools.compare import compare_dirs, first_divergent, first_nan_inf
from cannrt.tools.dump import load_dump_dir

SCALE = 2.0e4  # |h| > 3.3 overflows fp16 (65504) after the scale; fp32 holds it


def _pipeline(device: cannrt.Device, dtype: type, folder: Path) -> None:
    """fc (matmul) -> scale (mul) -> act (relu), every op dumped."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 32)) / 2
    w = rng.standard_normal((32, 16)) / 2
    stream = device.stream()
    a, b = device.array(x.astype(dtype)), device.array(w.astype(dtype))
    scale = device.array(np.full((16, 16), SCALE, dtype))
    h, scaled, out = (device.empty((16, 16), dtype) for _ in range(3))
    with cannrt.dump(folder):
        stream.launch("matmul", a, b, h, block_dim=4, name="fc")
        stream.launch("mul", h, scale, scaled, block_dim=4, name="scale")
        stream.launch("relu", scaled, out, block_dim=4, name="act")


def test_the_fp16_run_diverges_from_the_fp32_run_where_the_overflow_first_appears(
    device: cannrt.Device, tmp_path: Path
) -> None:
    _pipeline(device, np.float16, tmp_path / "fp16")
    _pipeline(device, np.float32, tmp_path / "fp32")
    rows = compare_dirs(tmp_path / "fp16", tmp_path / "fp32")
    verdicts = {(r.op.op_name, r.npu.label): r.reached for r in rows}
    assert verdicts[("fc", "output.2")]  # fp16 rounding of the matmul is within msprobe's rule
    assert verdicts[("scale", "input.0")] and not verdicts[("scale", "output.2")]
    assert not verdicts[("act", "input.0")]  # act only inherits the Inf
    (scaled,) = [r for r in rows if (r.op.op_name, r.npu.label) == ("scale", "output.2")]
    assert scaled.message == "NPU has NaN/Inf"
    divergent = first_divergent(rows)
    assert divergent is not None and (divergent.op_name, divergent.op_type) == ("scale", "Mul")
    produced = first_nan_inf(load_dump_dir(tmp_path / "fp16"))
    assert produced is not None and produced.op_name == "scale"
    assert first_nan_inf(load_dump_dir(tmp_path / "fp32")) is None
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "fp16"), str(tmp_path / "fp32")])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "first divergent op: scale (Mul)" in text
    assert "first op that produced NaN/Inf: scale (Mul)" in text
