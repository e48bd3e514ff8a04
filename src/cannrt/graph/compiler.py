"""The build (GE's GraphManager::BuildGraph): import -> passes -> precision -> lowering -> streams ->
memory -> events and tasks, once per gear, into one OfflineModel.

`compile_model` is what `cannrt atc` and `cannrt.Model.load("x.onnx")` call; `prepare_graph` stops
after the passes and precision, for tests and tools that want the rewritten graph.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from cannrt.config import PRESETS
from cannrt.dtypes import FORMAT_CODES, acl_code
from cannrt.graph.describe import describe
from cannrt.graph.errors import GraphError, ShapeError, UnsupportedOpError
from cannrt.graph.inplace import InPlace, alias_root, choose_concat_places
from cannrt.graph.ir import Graph, nbytes
from cannrt.graph.lowering import Lowered, LoweringError, Node, lower, supported_ops
from cannrt.graph.memory import Usage, WeightSection, plan_feature_maps
from cannrt.graph.onnx_import import import_model, load_model
from cannrt.graph.passes import run_passes
from cannrt.graph.precision import DEFAULT_MODE, apply_output_types, apply_precision, parse_output_type
from cannrt.graph.streams import assign_streams, schedule
from cannrt.graph.tasks import generate
from cannrt.kernels.nn.movement import CONCAT_INTO
from cannrt.om import Gear, IoDesc, OfflineModel

ONNX_FORMATS = ("NCHW", "ND", "NCDHW")  # what atc takes for --framework=5
MBATCH_INPUT = "ascend_mbatch_shape_data"
ALIASABLE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
LOG = logging.getLogger("cannrt.graph")


@dataclass(frozen=True)
class CompileOptions:
    """The atc options the build reads (names as atc spells them, in Python case)."""

    soc_version: str = "Ascend910B1"
    input_shape: Mapping[str, Sequence[int]] = field(default_factory=dict)  # -1: a dynamic batch dim
    input_format: str | None = None
    precision_mode: str = DEFAULT_MODE
    output_type: str | None = None
    out_nodes: Sequence[tuple[str, int]] = ()
    dynamic_batch_size: Sequence[int] = ()
    parallel_streams: bool = False  # independent branches on streams of their own
    max_streams: int = 4
    plan_time_limit: float = 5.0  # seconds the memory planner may search per gear
    optimize: bool = True  # run the graph passes (folding always runs)
    concat_in_place: bool = True  # producers write straight into a Concat's output (graph.inplace)
    name: str | None = None


@dataclass(frozen=True)
class CompiledGear:
    graph: Graph
    gear: Gear
    num_events: int
    num_streams: int
    nodes: tuple[Node, ...]  # the nodes that became tasks
    streams: tuple[int, ...]  # per task node
    inplace: InPlace  # the reshape aliases and the concat inputs placed in their outputs
    seconds: float


def prepare_graph(model: onnx.ModelProto, options: CompileOptions, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """The graph after import, the passes and the precision mode (graph.stats counts the rewrites)."""
    graph = import_model(model, shapes, options.out_nodes)
    stats = run_passes(graph) if options.optimize else {}
    stats["casts_inserted"] = apply_precision(graph, options.precision_mode)
    stats["output_casts"] = apply_output_types(graph, parse_output_type(options.output_type, graph))
    graph.stats = stats
    return graph


def compile_model(
    source: str | os.PathLike[str] | bytes | onnx.ModelProto, options: CompileOptions | None = None
) -> OfflineModel:
    """ONNX -> OfflineModel; GraphError (one line naming the node / tensor / option) for anything
    the build cannot do."""
    options = options or CompileOptions()
    if options.soc_version not in PRESETS:
        raise GraphError(f"--soc_version {options.soc_version!r}: this simulator models {', '.join(PRESETS)}")
    cores = len(PRESETS[options.soc_version].enabled_cores())
    model = load_model(source)
    batches = _gears(options)
    weights = WeightSection()
    compiled = []
    for batch in batches:
        shapes = {k: [batch if d == -1 else int(d) for d in v] for k, v in options.input_shape.items()}
        compiled.append(compile_gear(model, options, shapes, batch, cores, weights))
    largest = max(compiled, key=lambda c: c.gear.batch)
    first = largest.graph
    inputs = _io(first, first.inputs, [c.graph for c in compiled], True, options)
    outputs = _io(first, first.outputs, [c.graph for c in compiled], False, options)
    gears = [c.gear for c in compiled]
    if options.dynamic_batch_size:
        inputs.append(IoDesc(MBATCH_INPUT, acl_code(np.int64), FORMAT_CODES["ND"], (1,), 8))
        gears = [replace(g, input_shapes=(*g.input_shapes, (1,))) for g in gears]
    name = options.name or first.name
    graph = describe(largest.graph, largest.nodes, largest.streams, largest.inplace, options)
    graph["gears"] = [{"batch": c.gear.batch, "seconds": round(c.seconds, 3)} for c in compiled]
    return OfflineModel(
        name=name,
        soc_version=options.soc_version,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        weights=weights.data(),
        num_streams=max(c.num_streams for c in compiled),
        num_events=max(c.num_events for c in compiled),
        gears=tuple(gears),
        graph=graph,
    )


def _gears(options: CompileOptions) -> list[int]:
    dynamic = [name for name, dims in options.input_shape.items() if any(int(d) == -1 for d in dims)]
    if not options.dynamic_batch_size:
        if dynamic:
            raise ShapeError(f"--input_shape gives -1 dims for {dynamic[0]!r}: add --dynamic_batch_size")
        return [0]
    if not dynamic:
        raise ShapeError("--dynamic_batch_size needs -1 in the batch dim of --input_shape")
    sizes = [int(b) for b in options.dynamic_batch_size]
    if any(b <= 0 for b in sizes) or len(set(sizes)) != len(sizes):
        raise ShapeError(f"--dynamic_batch_size {sizes}: expected distinct positive batch sizes")
    return sizes


def compile_gear(
    model: onnx.ModelProto,
    options: CompileOptions,
    shapes: Mapping[str, Sequence[int]],
    batch: int,
    cores: int,
    weights: WeightSection,
) -> CompiledGear:
    """One gear: the graph for these input shapes, lowered, scheduled, planned and turned into tasks."""
    start = time.perf_counter()
    graph = prepare_graph(model, options, shapes)
    alias = choose_aliases(graph)
    inplace = choose_concat_places(graph, alias, options.concat_in_place)
    nodes, lowered = [], []
    for node in graph.nodes:
        if node.outputs[0] in alias:
            continue
        low = _without_placed_copies(_lower(node, graph, cores), inplace.placed.get(node.name, frozenset()))
        for value, array in low.constants:  # weights the lowering made (transformed ones)
            graph.values[value.name] = value
            graph.constants[value.name] = array
        if low.steps:
            nodes.append(node)
            lowered.append(low)
    usage, deps = _usage(nodes, lowered, graph, inplace)
    streams = assign_streams(deps, options.parallel_streams, options.max_streams)
    sched = schedule(streams, deps)
    sizes = {name: nbytes(value) for name, value in graph.values.items()}
    sizes.update({v.name: nbytes(v) for low in lowered for v in low.scratch})
    fm = plan_feature_maps(usage, sizes, inplace, graph.inputs, graph.outputs, sched, options.plan_time_limit)
    task_list = generate(nodes, lowered, sched, fm, graph.values, graph.constants, weights, graph.outputs)
    gear = Gear(
        batch=batch,
        input_shapes=tuple(graph.values[n].shape for n in graph.inputs),
        output_shapes=tuple(graph.values[n].shape for n in graph.outputs),
        tasks=task_list.tasks,
        plan=task_list.plan,
        work_size=fm.work_size,
        feature_map_size=fm.peak,
        feature_map_unplanned=fm.unplanned,
        feature_map_lower_bound=fm.bound,
    )
    seconds = time.perf_counter() - start
    LOG.info(
        "gear %d: %d nodes -> %d tasks on %d streams, %d events; feature maps %d bytes (bound %d, unplanned %d),"
        " work %d bytes; passes %s; %.2f s",
        batch,
        len(graph.nodes),
        len(task_list.tasks),
        sched.num_streams,
        task_list.num_events,
        fm.peak,
        fm.bound,
        fm.unplanned,
        fm.work_size,
        graph.stats,
        seconds,
    )
    return CompiledGear(
        graph, gear, task_list.num_events, sched.num_streams, tuple(nodes), tuple(streams), inplace, seconds
    )


def choose_aliases(graph: Graph) -> dict[str, str]:
    """Data-free reshapes whose output can share the input's buffer: output -> input. A group keeps
    at most one model input or output (a reshape from an input to an output stays a copy)."""
    alias: dict[str, str] = {}
    io = set(graph.inputs) | set(graph.outputs)
    has_io: dict[str, bool] = {}

    for node in graph.nodes:
        if node.op_type not in ALIASABLE or len(node.outputs) != 1 or not node.inputs:
            continue
        source, target = node.inputs[0], node.outputs[0]
        if source in graph.constants or any(i and i not in graph.constants for i in node.inputs[1:]):
            continue
        if nbytes(graph.values[source]) != nbytes(graph.values[target]):
            continue
        if graph.values[source].dtype != graph.values[target].dtype or graph.outputs.count(target) > 1:
            continue
        r = alias_root(source, alias)
        group_io = has_io.get(r, r in io)
        if group_io and target in io:
            continue
        alias[target] = source
        has_io[r] = group_io or target in io
    return alias


def _without_placed_copies(low: Lowered, placed: frozenset[tuple[str, int]]) -> Lowered:
    """A Concat's launches less the concat_into copies of the inputs placed in its output."""
    if not placed:
        return low
    steps = tuple(s for s in low.steps if not (s.kernel == CONCAT_INTO.name and (s.args[0], s.args[3]) in placed))
    return replace(low, steps=steps)


def _lower(node: Node, graph: Graph, cores: int) -> Lowered:
    if node.op_type not in supported_ops():
        raise UnsupportedOpError(node.name, node.op_type)
    try:
        return lower(node, graph.values, graph.constants, cores)
    except LoweringError as exc:
        raise GraphError(str(exc)) from None


def _usage(
    nodes: Sequence[Node], lowered: Sequence[Lowered], graph: Graph, inplace: InPlace
) -> tuple[Usage, list[list[int]]]:
    """Launch spans, reads and writes of the task nodes, and each one's producers among them: a
    read depends on the writer of the tensor and on the writers of every tensor placed in it."""
    writer: dict[str, int] = {}
    inside = inplace.contents()
    spans, reads, writes, scratch, deps = [], [], [], [], []
    step = 0

    def writers_of(name: str, found: set[int]) -> None:
        if name in writer:
            found.add(writer[name])
        if name in inplace.alias:  # a reshape: its input's bytes
            writers_of(inplace.alias[name], found)
        for member in inside.get(name, ()):  # a concat output: its placed inputs' bytes too
            writers_of(member, found)

    for n, (node, low) in enumerate(zip(nodes, lowered, strict=True)):
        temps = {v.name for v in low.scratch}
        named = {a for s in low.steps for a in s.args if isinstance(a, str)}
        mine_in = [i for i in dict.fromkeys(node.inputs) if i and i not in graph.constants]
        mine_out = [o for o in node.outputs if o]
        stray = named - temps - set(mine_in) - set(mine_out) - set(graph.constants)
        if stray:
            raise GraphError(f"node {node.name!r} ({node.op_type}): its kernels name {sorted(stray)}, not its tensors")
        producers: set[int] = set()
        for name in mine_in:
            writers_of(name, producers)
        for name in mine_out:
            writer[name] = n
        spans.append((step, step + len(low.steps)))
        step += len(low.steps)
        reads.append(mine_in)
        writes.append(mine_out)
        scratch.append([(v.name, nbytes(v)) for v in low.scratch])
        deps.append(sorted(producers))
    return Usage(spans, reads, writes, scratch, step), deps


def _io(
    graph: Graph, names: Sequence[str], gears: Sequence[Graph], is_input: bool, options: CompileOptions
) -> list[IoDesc]:
    fmt = (options.input_format or "").upper()
    if fmt and fmt not in ONNX_FORMATS:
        raise GraphError(f"--input_format {options.input_format!r}: ONNX models take {', '.join(ONNX_FORMATS)}")
    descs = []
    for i, name in enumerate(names):
        value = graph.values[name]
        shapes = [g.values[(g.inputs if is_input else g.outputs)[i]].shape for g in gears]
        dims = tuple(d if all(s[k] == d for s in shapes) else -1 for k, d in enumerate(value.shape))
        size = max(int(np.prod(s, dtype=np.int64)) for s in shapes) * value.dtype.itemsize
        if is_input:
            code = FORMAT_CODES[fmt] if fmt else FORMAT_CODES["NCHW" if len(value.shape) == 4 else "ND"]
        else:
            code = FORMAT_CODES["ND"]
        try:
            dtype = acl_code(value.dtype)
        except ValueError:
            kind = "input" if is_input else "output"
            raise GraphError(f"{kind} {name!r} has type {value.dtype}, which no ACL type code names") from None
        descs.append(IoDesc(name, dtype, code, dims, size))
    return descs
