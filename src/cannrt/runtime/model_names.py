"""The ONNX op type of each model node a profiler saw executed, so that profiles show model ops
by node name and op type (msprof's Op Name / OP Type) instead of by kernel. The node name itself
travels with the launch (its op name); node names are unique within a model."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cannrt.runtime.core import Runtime

_tables: weakref.WeakKeyDictionary[Runtime, dict[str, str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def note(runtime: Runtime, op_types: dict[str, str]) -> None:
    """Remember the op type of each node of a model being executed (while a profiler collects)."""
    with _lock:
        _tables.setdefault(runtime, {}).update(op_types)


def op_types(runtime: Runtime) -> dict[str, str]:
    """{node name: op type} of the nodes noted since the last call (which forgets them)."""
    with _lock:
        return _tables.pop(runtime, {})
