"""Normalisations, Softmax and reductions onto their vector kernels."""

from __future__ import annotations

from cannrt.graph.lowering.context import FUSABLE, Lowering, normalize_axis, rule
from cannrt.graph.lowering.cube import ACTIVATIONS, activation
from cannrt.kernels.nn.normalize import HARDMAX, LOG_SOFTMAX, REDUCE_KINDS, SOFTMAX

REDUCE_OPS = {
    "ReduceMean": "mean",
    "ReduceSum": "sum",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
    "ReduceL1": "l1",
    "ReduceL2": "l2",
    "ReduceLogSum": "log_sum",
    "ReduceLogSumExp": "log_sum_exp",
    "ReduceSumSquare": "sum_square",
}
AXES_INPUT_SINCE = {"ReduceSum": 13}  # the others take axes as an input from opset 18


FUSABLE["BatchNormalization"] = ACTIVATIONS


@rule("BatchNormalization")
def batchnorm(low: Lowering) -> None:
    tensors = [low.input(i) for i in range(5)]
    if int(low.attr("training_mode", 0)) or len([o for o in low.node.outputs if o]) > 1:
        outputs = [low.output(i) for i in range(3)]  # y, running mean, running var
        if len([o for o in low.node.outputs if o]) != 3:
            raise low.fail("training mode computes y, running_mean and running_var (3 outputs)")
        eps, momentum = float(low.attr("epsilon", 1e-5)), float(low.attr("momentum", 0.9))
        low.emit("batchnorm_training", [*tensors, *outputs], [eps, momentum])
        return
    scalars: list[int | float] = [float(low.attr("epsilon", 1e-5))]
    if low.attr("activation") is not None:
        scalars.extend(activation(low))
    low.emit("batchnorm", [*tensors, low.output()], scalars)


@rule("InstanceNormalization")
def instancenorm(low: Lowering) -> None:
    tensors = [low.input(i) for i in range(3)]
    low.emit("instancenorm", [*tensors, low.output()], [float(low.attr("epsilon", 1e-5))])


@rule("LRN")
def lrn(low: Lowering) -> None:
    scalars = [int(low.attr("size")), float(low.attr("alpha", 1e-4)), float(low.attr("beta", 0.75))]
    low.emit("lrn", [low.input(0), low.output()], [*scalars, float(low.attr("bias", 1.0))])


@rule("Softmax", "LogSoftmax", "Hardmax")
def softmax(low: Lowering) -> None:
    x = low.input(0)
    old = low.node.opset < 13
    axis = normalize_axis(low, int(low.attr("axis", 1 if old else -1)), len(x.shape))
    kind = {"Softmax": SOFTMAX, "LogSoftmax": LOG_SOFTMAX, "Hardmax": HARDMAX}[low.node.op_type]
    low.emit("softmax", [x, low.output()], [axis, int(old), kind])


def reduction_axes(low: Lowering, rank: int, since: int) -> tuple[int, ...] | None:
    """The axes to reduce, None for "all"; () means the node is a no-op (noop_with_empty_axes)."""
    if low.node.opset >= since and len(low.node.inputs) > 1:
        given = low.optional_constant(1, "axes")
        axes = None if given is None else [int(a) for a in given.reshape(-1)]
    else:
        attr = low.attr("axes")
        axes = None if attr is None or len(attr) == 0 else [int(a) for a in attr]
    if axes is None:
        return () if int(low.attr("noop_with_empty_axes", 0)) else None
    return tuple(sorted({normalize_axis(low, a, rank) for a in axes}))


@rule(*REDUCE_OPS)
def reduce(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    since = AXES_INPUT_SINCE.get(low.node.op_type, 18)
    if low.has(1):  # an axes input means the newer form, whatever opset the model states
        since = 0
    axes = reduction_axes(low, len(x.shape), since)
    if axes == ():
        low.emit("copy", [x, y])
        return
    mask = sum(1 << a for a in (range(len(x.shape)) if axes is None else axes))
    low.emit("reduce", [x, y], [REDUCE_KINDS.index(REDUCE_OPS[low.node.op_type]), mask])


@rule("ArgMax", "ArgMin")
def argreduce(low: Lowering) -> None:
    x = low.input(0)
    axis = normalize_axis(low, int(low.attr("axis", 0)), len(x.shape))
    kind = 0 if low.node.op_type == "ArgMax" else 1
    low.emit("argreduce", [x, low.output()], [axis, kind, int(low.attr("select_last_index", 0))])
