"""Data movement on the vector unit (MTE-bound): copies, layout changes and gathers.

copy x, y (same elements, any shape: Reshape / Flatten / Squeeze / Identity); expand x, y
(broadcast); tile x, y; fill y, value; shape x, y, start; transpose x, y, *perm;
concat_into x, y, axis, offset (x into its slab of y); slice x, y, then per axis start, step;
gather data, indices, y, axis; pad x, y, mode, value, then pads begin and end per axis.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cannrt.abi import TensorArg, Work, tensor_nbytes
from cannrt.kernels.builtins import ELEMENTS_PER_UNIT, count, vector_rate
from cannrt.kernels.nn.common import check_broadcast, check_scalars, register, store
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError

PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP = range(4)
PAD_MODES = {PAD_CONSTANT: "constant", PAD_REFLECT: "reflect", PAD_EDGE: "edge", PAD_WRAP: "wrap"}


def _move_work(reads: tuple[int, ...] | None = None, written: int = -1) -> Callable[[ArgSpecs], Work]:
    """Bytes moved: the tensors `reads` (default every input) read once, tensor `written` once."""

    def work(specs: ArgSpecs) -> Work:
        tensors = [s for s in specs if isinstance(s, TensorArg)]
        out = tensors[written]
        inputs = tensors[:-1] if reads is None else [tensors[i] for i in reads]
        elements = count(out)
        return Work(
            vector_ops=elements,
            vector_rate=vector_rate(out),
            bytes_read=sum(tensor_nbytes(t) for t in inputs),
            bytes_written=tensor_nbytes(out),
            units=max(1, -(-elements // ELEMENTS_PER_UNIT)),
        )

    return work


def _copy(x: np.ndarray, y: np.ndarray) -> None:
    np.copyto(y.reshape(-1), x.reshape(-1), casting="unsafe")


def _check_copy(specs: ArgSpecs) -> None:
    x, y = check_scalars("copy", specs, 2)
    if count(x) != count(y) or x.dtype != y.dtype:
        raise KernelArgumentError(f"copy: {x.shape} dtype {x.dtype} into {y.shape} dtype {y.dtype}")


def _check_expand(specs: ArgSpecs) -> None:
    x, y = check_scalars("expand", specs, 2)
    check_broadcast("expand", [x], y)


def _tile(x: np.ndarray, y: np.ndarray) -> None:
    store(y, np.tile(x, [o // max(1, i) for o, i in zip(y.shape, x.shape, strict=True)]))


def _check_tile(specs: ArgSpecs) -> None:
    x, y = check_scalars("tile", specs, 2)
    if len(x.shape) != len(y.shape) or any(i == 0 or o % i for i, o in zip(x.shape, y.shape, strict=True)):
        raise KernelArgumentError(f"tile: {y.shape} is not a whole tiling of {x.shape}")


def _fill(y: np.ndarray, value: float) -> None:
    y[...] = value


def _check_fill(specs: ArgSpecs) -> None:
    check_scalars("fill", specs, 1, floats=1)


def _shape(x: np.ndarray, y: np.ndarray, start: int) -> None:
    y[...] = np.asarray(x.shape[start : start + y.shape[0]], dtype=y.dtype)


def _check_shape(specs: ArgSpecs) -> None:
    x, y = check_scalars("shape", specs, 2, ints=1)
    start = specs[2]
    assert isinstance(start, int)
    if len(y.shape) != 1 or not 0 <= start <= len(x.shape) - y.shape[0]:
        raise KernelArgumentError(f"shape: output {y.shape} from {start} of a rank {len(x.shape)} input")


def _transpose(x: np.ndarray, y: np.ndarray, *perm: int) -> None:
    np.copyto(y, x.transpose(perm), casting="unsafe")


def _check_transpose(specs: ArgSpecs) -> None:
    x = specs[0]
    rank = len(x.shape) if isinstance(x, TensorArg) else 0
    x, y = check_scalars("transpose", specs, 2, ints=rank)
    perm = list(specs[2:])
    if sorted(perm) != list(range(rank)) or tuple(y.shape) != tuple(x.shape[p] for p in perm):  # type: ignore[index]
        raise KernelArgumentError(f"transpose: perm {perm} takes {x.shape} to {y.shape}?")


def _concat_into(x: np.ndarray, y: np.ndarray, axis: int, offset: int) -> None:
    index = (slice(None),) * axis + (slice(offset, offset + x.shape[axis]),)
    np.copyto(y[index], x, casting="unsafe")


def _check_concat_into(specs: ArgSpecs) -> None:
    x, y = check_scalars("concat_into", specs, 2, ints=2)
    axis, offset = specs[2], specs[3]
    assert isinstance(axis, int) and isinstance(offset, int)
    ok = len(x.shape) == len(y.shape) and 0 <= axis < len(x.shape) and offset >= 0
    if (
        not ok
        or offset + x.shape[axis] > y.shape[axis]
        or any(a != b for i, (a, b) in enumerate(zip(x.shape, y.shape, strict=True)) if i != axis)
    ):
        raise KernelArgumentError(f"concat_into: {x.shape} at {offset} on axis {axis} of {y.shape}")


def _slice(x: np.ndarray, y: np.ndarray, *ints: int) -> None:
    index = []
    for axis, n in enumerate(y.shape):
        start, step = ints[2 * axis], ints[2 * axis + 1]
        stop = start + step * n
        index.append(slice(start, None if stop < 0 else stop, step))
    np.copyto(y, x[tuple(index)], casting="unsafe")


def _check_slice(specs: ArgSpecs) -> None:
    x = specs[0]
    rank = len(x.shape) if isinstance(x, TensorArg) else 0
    x, y = check_scalars("slice", specs, 2, ints=2 * rank)
    for axis, (extent, n) in enumerate(zip(x.shape, y.shape, strict=True)):
        start, step = specs[2 + 2 * axis], specs[3 + 2 * axis]
        assert isinstance(start, int) and isinstance(step, int)
        last = start + step * (n - 1)
        if step == 0 or (n and not (0 <= start < extent and 0 <= last < extent)):
            raise KernelArgumentError(f"slice: axis {axis}: {n} elements from {start} step {step} of {extent}")


def _gather(data: np.ndarray, indices: np.ndarray, y: np.ndarray, axis: int) -> None:
    extent = data.shape[axis]
    index = np.where(indices < 0, indices + extent, indices)
    if index.size and (index.min() < 0 or index.max() >= extent):
        raise IndexError(f"gather: index out of [-{extent}, {extent}) on axis {axis}")
    store(y, np.take(data, index, axis=axis))


def _check_gather(specs: ArgSpecs) -> None:
    data, indices, y = check_scalars("gather", specs, 3, ints=1)
    axis = specs[3]
    assert isinstance(axis, int)
    if not 0 <= axis < len(data.shape) or indices.dtype not in (3, 9):
        raise KernelArgumentError(f"gather: axis {axis} of rank {len(data.shape)}, index dtype code {indices.dtype}")
    expect = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :])
    if tuple(y.shape) != expect:
        raise KernelArgumentError(f"gather: output {y.shape}, expected {expect}")


def _pad(x: np.ndarray, y: np.ndarray, mode: int, value: float, *pads: int) -> None:
    rank = x.ndim
    begin, end = pads[:rank], pads[rank:]
    crop = tuple(slice(max(0, -b), x.shape[a] - max(0, -e)) for a, (b, e) in enumerate(zip(begin, end, strict=True)))
    grow = [(max(0, b), max(0, e)) for b, e in zip(begin, end, strict=True)]
    source = x[crop]
    if PAD_MODES[mode] == "constant":
        result = np.pad(source, grow, mode="constant", constant_values=np.asarray(value).astype(x.dtype))
    else:
        result = np.pad(source, grow, mode=PAD_MODES[mode])  # type: ignore[call-overload]
    store(y, result)


def _check_pad(specs: ArgSpecs) -> None:
    x = specs[0]
    rank = len(x.shape) if isinstance(x, TensorArg) else 0
    x, y = check_scalars("pad", specs, 2, ints=1, floats=1 + 2 * rank)
    pads = [p for p in specs[4:] if isinstance(p, int)]
    if len(pads) != 2 * rank or specs[2] not in PAD_MODES:
        raise KernelArgumentError(f"pad: mode {specs[2]} and {len(pads)} int pads for rank {rank}")
    expect = tuple(n + pads[a] + pads[a + rank] for a, n in enumerate(x.shape))
    if tuple(y.shape) != expect:
        raise KernelArgumentError(f"pad: output {y.shape}, expected {expect}")
    if specs[2] != PAD_CONSTANT and count(x) == 0 and count(y) > 0:
        raise KernelArgumentError("pad: reflect / edge / wrap of an empty input")


COPY = register("copy", _copy, _move_work(), _check_copy, (1,))
EXPAND = register("expand", lambda x, y: store(y, np.broadcast_to(x, y.shape)), _move_work(), _check_expand, (1,))
TILE = register("tile", _tile, _move_work(), _check_tile, (1,))
FILL = register("fill", _fill, _move_work((), 0), _check_fill, (0,))
SHAPE = register("shape", _shape, _move_work(()), _check_shape, (1,))
TRANSPOSE = register("transpose", _transpose, _move_work(), _check_transpose, (1,))
CONCAT_INTO = register("concat_into", _concat_into, _move_work((0,), 0), _check_concat_into, (1,))
SLICE = register("slice", _slice, _move_work(), _check_slice, (1,))
GATHER = register("gather", _gather, _move_work(), _check_gather, (2,))
PAD = register("pad", _pad, _move_work(), _check_pad, (1,))
