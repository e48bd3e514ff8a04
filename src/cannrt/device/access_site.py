"""Where in a kernel's Python code an access happened: the real PC of a fault.

Kernels run Python code, so the line that touches a tensor is the instruction that accessed it.
When the MMU refuses a tensor argument before the kernel runs, the kernel is replayed on scratch
copies of its other arguments with the refused one replaced by a stand-in that raises on its
first data access: the innermost frame of the kernel's code at that moment is the faulting line.
A kernel's own exception and a floating-point exception carry their frame already. Nothing here
runs unless a fault happened.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, NamedTuple

import numpy as np

from cannrt.abi import TensorArg, tensor_nbytes
from cannrt.dtypes import numpy_dtype

REPLAY_LIMIT_BYTES = 256 << 20  # scratch memory a replay may take; beyond it the line is not located
_NUMPY_DIR = os.path.dirname(np.__file__)
_THIS_FILE = __file__


class SourceLine(NamedTuple):
    """A line of a kernel's implementation."""

    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}"


class TouchedFault(Exception):
    """The replayed kernel touched the data of the refused tensor."""


def _touch(*_args: Any, **_kwargs: Any) -> Any:
    raise TouchedFault


class Untouchable:
    """Stands for a tensor the MMU refused: its metadata reads work, any data access raises."""

    __array_priority__ = 1000.0

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape = tuple(shape)
        self.dtype = dtype
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.itemsize = dtype.itemsize
        self.nbytes = self.size * dtype.itemsize

    __array_ufunc__ = _touch
    __array_function__ = _touch
    __array__ = _touch
    __getitem__ = _touch
    __setitem__ = _touch
    __iter__ = _touch
    __float__ = _touch
    __int__ = _touch
    __bool__ = _touch

    def __getattr__(self, name: str) -> Any:  # astype, max, reshape, ...: all read the data
        raise TouchedFault


for _name in ("add", "sub", "mul", "truediv", "floordiv", "pow", "matmul", "mod", "and", "or", "xor"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(Untouchable, _form.format(_name), _touch)
for _name in ("__neg__", "__pos__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(Untouchable, _name, _touch)


def _is_kernel_frame(path: str) -> bool:
    return path != _THIS_FILE and not path.startswith(_NUMPY_DIR)


def line_of_traceback(tb: TracebackType | None) -> SourceLine | None:
    """The innermost frame of a traceback that lies in kernel code (not numpy, not this module)."""
    found: SourceLine | None = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if _is_kernel_frame(code.co_filename):
            found = SourceLine(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def line_of_frame(frame: FrameType | None) -> SourceLine | None:
    """The nearest frame at or above `frame` that lies in kernel code."""
    while frame is not None and not _is_kernel_frame(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return SourceLine(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def caller_line() -> SourceLine | None:
    """The kernel line that called the numpy function now raising a floating-point flag."""
    return line_of_frame(sys._getframe(2))


def locate_access(compute: Callable[..., None], args: tuple[object, ...], refused: int) -> SourceLine | None:
    """Replay compute on scratch arrays with argument `refused` untouchable; the line that first
    touches it (None if the kernel never does, fails otherwise first, or its scratch copies would
    pass REPLAY_LIMIT_BYTES)."""
    scratch = sum(tensor_nbytes(a) for i, a in enumerate(args) if isinstance(a, TensorArg) and i != refused)
    if scratch > REPLAY_LIMIT_BYTES:
        return None
    values: list[object] = []
    for index, arg in enumerate(args):
        if not isinstance(arg, TensorArg):
            values.append(arg)
        elif index == refused:
            values.append(Untouchable(tuple(arg.shape), numpy_dtype(arg.dtype)))
        else:
            values.append(np.zeros(arg.shape, dtype=numpy_dtype(arg.dtype)))
    try:
        with np.errstate(all="ignore"):
            compute(*values)
    except TouchedFault:
        return line_of_traceback(sys.exc_info()[2])
    except Exception:  # the replay failed on scratch data before touching the refused tensor
        return None
    return None


def parameter_name(compute: Callable[..., None], index: int) -> str:
    """The name of positional parameter `index` of a kernel's implementation ("" if none)."""
    try:
        parameters = list(inspect.signature(compute).parameters.values())
    except (TypeError, ValueError):
        return ""
    if index < len(parameters) and parameters[index].kind != inspect.Parameter.VAR_POSITIONAL:
        return parameters[index].name
    variadic = [p for p in parameters if p.kind == inspect.Parameter.VAR_POSITIONAL]
    return f"{variadic[0].name}[{index - len(parameters) + 1}]" if variadic else ""
