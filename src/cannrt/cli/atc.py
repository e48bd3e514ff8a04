"""`cannrt atc`: the Ascend Tensor Compiler's command line over cannrt's graph engine.

    cannrt atc --model=resnet50.onnx --framework=5 --output=resnet50 --soc_version=Ascend910B1
               [--input_shape="data:1,3,224,224"] [--input_format=NCHW] [--precision_mode=force_fp16]
               [--output_type=FP32] [--out_nodes="Conv_1:0"] [--dynamic_batch_size="1,2,4"] [--log=info]
    cannrt atc --singleop=ops.json --output=DIR --soc_version=Ascend910B1
    cannrt atc --mode=1 --om=model.om --json=model.json

Errors print one line (what is wrong, naming the node, tensor or option) and exit 1.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from cannrt.graph import CompileOptions, GraphError, compile_model
from cannrt.graph.singleop import compile_ops
from cannrt.om import format as om_format

FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", 5: "ONNX"}
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class UsageError(ValueError):
    """A malformed option value."""


def parse_input_shape(text: str) -> dict[str, list[int]]:
    """ "a:1,3,224,224;b:1,300" -> {"a": [1, 3, 224, 224], "b": [1, 300]} (a name may hold ':')."""
    shapes: dict[str, list[int]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, dims = part.rpartition(":")
        values: list[int] | None
        try:
            values = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            values = None
        if not sep or not name or values is None or any(d < -1 for d in values):
            raise UsageError(f'--input_shape {part!r}: expected "name:d1,d2,..." with dims >= -1')
        shapes[name] = values
    if not shapes:
        raise UsageError(f'--input_shape {text!r}: expected "name:d1,d2,...;name2:..."')
    return shapes


def parse_out_nodes(text: str) -> list[tuple[str, int]]:
    """ "Conv_434:0;Conv_418:0" -> [("Conv_434", 0), ("Conv_418", 0)]."""
    nodes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, index = part.rpartition(":")
        if not sep or not name or not index.isdigit():
            raise UsageError(f'--out_nodes {part!r}: expected "node_name:output_index"')
        nodes.append((name, int(index)))
    return nodes


def parse_batches(text: str) -> list[int]:
    try:
        sizes = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UsageError(f'--dynamic_batch_size {text!r}: expected "1,2,4,8"') from None
    if not sizes:
        raise UsageError(f'--dynamic_batch_size {text!r}: expected "1,2,4,8"')
    return sizes


def model_json(path: Path) -> dict[str, Any]:
    """What --mode=1 writes: the model's I/O, sizes, graph and per gear its tasks and plan."""
    model = om_format.load(path)
    gears = []
    for gear in model.gears:
        tasks = []
        for task in gear.tasks:
            entry: dict[str, Any] = {"kind": type(task).__name__, "stream": task.stream}
            for key in ("kernel", "block_dim", "node", "op_type", "event", "nbytes"):
                if hasattr(task, key):
                    entry[key] = getattr(task, key)
            tasks.append(entry)
        gears.append(
            {
                "batch": gear.batch,
                "input_shapes": [list(s) for s in gear.input_shapes],
                "output_shapes": [list(s) for s in gear.output_shapes],
                "work_size": gear.work_size,
                "feature_map_size": gear.feature_map_size,
                "feature_map_unplanned": gear.feature_map_unplanned,
                "feature_map_lower_bound": gear.feature_map_lower_bound,
                "tasks": tasks,
                "plan": [vars(p) for p in gear.plan],
            }
        )
    ios = [[vars(io) | {"shape": list(io.shape)} for io in group] for group in (model.inputs, model.outputs)]
    return {
        "name": model.name,
        "soc_version": model.soc_version,
        "inputs": ios[0],
        "outputs": ios[1],
        "num_streams": model.num_streams,
        "num_events": model.num_events,
        "weight_size": model.weight_size,
        "work_size": model.work_size,
        "graph": model.graph,
        "gears": gears,
    }


def atc_command(
    model: Annotated[str | None, typer.Option("--model", help="the source model (ONNX)")] = None,
    framework: Annotated[int | None, typer.Option("--framework", help="5: ONNX (0 Caffe, 1 MindSpore, 3 TF)")] = None,
    output: Annotated[str | None, typer.Option("--output", help="NAME of NAME.om, or the --singleop folder")] = None,
    soc_version: Annotated[str | None, typer.Option("--soc_version", help="chip, e.g. Ascend910B1")] = None,
    input_shape: Annotated[str | None, typer.Option("--input_shape", help='"name:1,3,224,224;..."')] = None,
    input_format: Annotated[str | None, typer.Option("--input_format", help="NCHW, NCDHW or ND")] = None,
    precision_mode: Annotated[
        str | None,
        typer.Option(
            "--precision_mode", help="force_fp16 (default), allow_fp32_to_fp16, force_fp32, must_keep_origin_dtype"
        ),
    ] = None,
    output_type: Annotated[str | None, typer.Option("--output_type", help='FP32, FP16, or "node:0:FP16;..."')] = None,
    out_nodes: Annotated[str | None, typer.Option("--out_nodes", help='"node:0;node2:1" as the outputs')] = None,
    dynamic_batch_size: Annotated[str | None, typer.Option("--dynamic_batch_size", help='"1,2,4,8"')] = None,
    log: Annotated[str, typer.Option("--log", help="debug, info, warning, error or null")] = "null",
    singleop: Annotated[str | None, typer.Option("--singleop", help="ops.json: one model per entry")] = None,
    mode: Annotated[int, typer.Option("--mode", help="0: compile; 1: dump --om as --json")] = 0,
    om: Annotated[str | None, typer.Option("--om", help="the model --mode=1 reads")] = None,
    json_path: Annotated[str | None, typer.Option("--json", help="the JSON --mode=1 writes")] = None,
    parallel_streams: Annotated[
        int, typer.Option("--parallel_streams", help="cannrt: up to N streams for independent branches (0: GE's one)")
    ] = 0,
) -> None:
    """Compile an ONNX model into NAME.om (atc), single operators into a model folder, or dump an .om."""
    _configure_log(log)
    try:
        if mode == 1:
            _dump(om, json_path)
        elif mode != 0:
            raise UsageError(f"--mode={mode}: cannrt supports 0 (compile) and 1 (offline model to JSON)")
        elif singleop is not None:
            _singleop(singleop, output, soc_version)
        else:
            options = _options(
                framework,
                soc_version,
                input_shape,
                input_format,
                precision_mode,
                output_type,
                out_nodes,
                dynamic_batch_size,
                parallel_streams,
                output,
            )
            _compile(model, output, options)
    except (GraphError, UsageError, om_format.OmFormatError) as exc:
        typer.echo(f"ATC run failed: {exc}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"ATC run failed: {exc.filename or ''}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    except Exception as exc:  # a bug of ours still ends in one line, not a traceback
        typer.echo(f"ATC run failed: internal error ({type(exc).__name__}: {exc})", err=True)
        raise typer.Exit(1) from None
    typer.echo("ATC run success, welcome to the next use.")


def _configure_log(level: str) -> None:
    logger = logging.getLogger("cannrt.graph")
    logger.handlers.clear()
    if level.lower() in LOG_LEVELS:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s] GE: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(LOG_LEVELS[level.lower()])
    elif level.lower() == "null":
        logger.setLevel(logging.CRITICAL + 1)
    else:
        raise typer.BadParameter(f"--log {level!r}: expected debug, info, warning, error or null")


def _options(
    framework: int | None,
    soc_version: str | None,
    input_shape: str | None,
    input_format: str | None,
    precision_mode: str | None,
    output_type: str | None,
    out_nodes: str | None,
    dynamic_batch_size: str | None,
    parallel_streams: int,
    output: str | None,
) -> CompileOptions:
    if framework is None:
        raise UsageError("--framework is required (5 for ONNX)")
    if framework != 5:
        name = FRAMEWORKS.get(framework)
        what = f"framework {framework} ({name})" if name else f"framework {framework}"
        raise UsageError(f"--framework: {what} is not supported, cannrt compiles ONNX models (--framework=5)")
    if not soc_version:
        raise UsageError("--soc_version is required (e.g. Ascend910B1)")
    if not output:
        raise UsageError("--output is required (NAME of NAME.om)")
    return CompileOptions(
        soc_version=soc_version,
        input_shape=parse_input_shape(input_shape) if input_shape else {},
        input_format=input_format,
        precision_mode=precision_mode or CompileOptions.precision_mode,
        output_type=output_type,
        out_nodes=parse_out_nodes(out_nodes) if out_nodes else (),
        dynamic_batch_size=parse_batches(dynamic_batch_size) if dynamic_batch_size else (),
        parallel_streams=parallel_streams > 1,
        max_streams=max(parallel_streams, 1),
        name=Path(output).name,
    )


def _compile(model: str | None, output: str | None, options: CompileOptions) -> None:
    if not model:
        raise UsageError("--model is required")
    started = time.perf_counter()
    compiled = compile_model(model, options)
    target = Path(f"{output}.om")
    om_format.save(compiled, target)
    logging.getLogger("cannrt.graph").info("wrote %s in %.2f s", target, time.perf_counter() - started)


def _singleop(path: str, output: str | None, soc_version: str | None) -> None:
    if not output:
        raise UsageError("--output is required (the folder of the single-operator models)")
    folder = Path(output)
    models = compile_ops(path, soc_version or "Ascend910B1")
    folder.mkdir(parents=True, exist_ok=True)
    for name, compiled in models:
        om_format.save(compiled, folder / name)


def _dump(om: str | None, json_path: str | None) -> None:
    if not om or not json_path:
        raise UsageError("--mode=1 needs --om=MODEL.om and --json=OUT.json")
    Path(json_path).write_text(json.dumps(model_json(Path(om)), indent=1))


def register(app: typer.Typer) -> None:
    """Add the `atc` command to the `cannrt` application."""
    app.command("atc")(atc_command)
