"""The `cannrt run` command: load a model (.om, or .onnx compiled on the fly), run it once, report.

Prints each output's shape and dtype, the modelled device time, the wall time of the call, the
weight bytes and the feature-map bytes (planned, the unplanned sum, the lower bound). Inputs come
from .npy files (--input, in input order or NAME=FILE), else seeded random data. --profile DIR
writes the msprof folder of the run; --compare onnxruntime runs the .onnx model on onnxruntime's
CPU provider with the same inputs and prints the largest absolute difference per output.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from cannrt.api.model import Model
from cannrt.api.profile import profile
from cannrt.dtypes import FLOAT8_E8M0, NPY_WIDENED, numpy_dtype
from cannrt.errors import CannError
from cannrt.om.model import IoDesc

SEED = 0


def _inputs(model: Model, files: list[str]) -> list[np.ndarray]:
    """The arrays of --input (positional or NAME=FILE), else seeded random data of each input."""
    descs = model.inputs
    if files:
        named = dict(f.split("=", 1) for f in files if "=" in f)
        plain = [f for f in files if "=" not in f]
        if named and plain:
            raise ValueError("--input takes either FILE for every input in order or NAME=FILE for each")
        paths = [named.get(io.name, "") for io in descs] if named else plain
        if len(paths) != len(descs) or not all(paths):
            raise ValueError(f"the model takes {len(descs)} inputs ({', '.join(io.name for io in descs)})")
        return [np.load(path, allow_pickle=False) for path in paths]
    rng = np.random.default_rng(SEED)
    return [_random(io, rng) for io in descs]


def _random(io: IoDesc, rng: np.random.Generator) -> np.ndarray:
    dtype = numpy_dtype(io.dtype)
    shape = tuple(1 if d == -1 else d for d in io.shape)
    if dtype == FLOAT8_E8M0:  # powers of two only (no sign, no zero)
        return (2.0 ** rng.integers(-4, 4, shape)).astype(dtype)
    if NPY_WIDENED.get(dtype, dtype).kind == "f":  # ml_dtypes floats are kind "V": their widened type
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)


def _onnxruntime(path: str, model: Model, arrays: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: not a warning per initializer the model leaves unused
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {io.name: array for io, array in zip(model.inputs, arrays, strict=True)}
    try:
        return [np.asarray(r) for r in session.run(None, feeds)]
    except RuntimeError as exc:  # e.g. float8 FNUZ outputs, which onnxruntime's numpy bridge lacks
        raise ValueError(f"--compare onnxruntime: {exc}") from None


def _mib(n: int) -> str:
    return f"{n:,} B ({n / (1 << 20):.2f} MiB)"


def run_command(
    model_path: Annotated[str, typer.Argument(metavar="MODEL", help="an .om from `cannrt atc`, or an .onnx")],
    inputs: Annotated[list[str] | None, typer.Option("--input", help=".npy per input, in order, or NAME=FILE")] = None,
    profile_dir: Annotated[
        str | None, typer.Option("--profile", help="write the msprof folder of the run here")
    ] = None,
    compare: Annotated[str | None, typer.Option("--compare", help="onnxruntime: compare the outputs with it")] = None,
) -> None:
    """Run MODEL once and print its outputs, device and wall time, weight and feature-map bytes."""
    try:
        if compare is not None and compare != "onnxruntime":
            raise ValueError(f"--compare takes 'onnxruntime', not {compare!r}")
        if compare and not model_path.endswith(".onnx"):
            raise ValueError("--compare onnxruntime needs the .onnx model")
        if not Path(model_path).exists():
            raise ValueError(f"{model_path}: no such file")
        started = time.perf_counter()
        model = Model.load(model_path)
        loaded_s = time.perf_counter() - started
        arrays = _inputs(model, inputs or [])
        if profile_dir is not None:
            with profile(profile_dir) as prof:
                outputs = model(*arrays)
            where = f"profile: {prof.path}"
        else:
            outputs = model(*arrays)
            where = ""
        stats, figures = model.stats, model.feature_map_bytes()
        reference = _onnxruntime(model_path, model, arrays) if compare else None
        model.close()
    except (CannError, OSError, ValueError, ImportError) as exc:
        typer.echo(f"cannrt run: {exc}".splitlines()[0], err=True)
        raise typer.Exit(1) from None
    lines: list[Any] = [f"model: {model.offline.name} ({model_path}), loaded in {loaded_s:.3f} s"]
    for io, out in zip(model.outputs, outputs, strict=True):
        lines.append(f"output {io.name}: shape {tuple(out.shape)} {out.dtype}")
    lines += [
        f"device time (modelled): {stats.device_ns / 1e6:.3f} ms",
        f"wall time: {stats.wall_s * 1e3:.3f} ms (host submit {stats.submit_s * 1e3:.3f} ms)",
        f"weights: {_mib(model.offline.weight_size)}",
        f"feature maps: planned {_mib(figures.planned)}, unplanned sum {_mib(figures.unplanned)}, "
        f"lower bound {_mib(figures.lower_bound)}",
    ]
    if reference is not None:
        for io, out, ref in zip(model.outputs, outputs, reference, strict=True):
            diff = float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))) if out.size else 0.0
            lines.append(f"max |cannrt - onnxruntime| of {io.name}: {diff:.3e}")
    if where:
        lines.append(where)
    typer.echo("\n".join(str(line) for line in lines))


def register(app: typer.Typer) -> None:
    """Add the `run` command to the `cannrt` application."""
    app.command("run")(run_command)
