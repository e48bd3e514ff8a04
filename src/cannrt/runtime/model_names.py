"""The ONNX op type of each model node a profiler saw executed, so that profiles show model ops
by node name and op type (msprof's Op Name / OP Type) instead of by kernel. The node name itself
travels with the launch (its op name); node names are unique within a model. The types go to the
profile's op-name collector (runtime.tracing.OpNames), reached through the runtime's host-call sink."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cannrt.runtime.tracing import op_names_of

if TYPE_CHECKING:
    from cannrt.runtime.core import Runtime


def note(runtime: Runtime, op_types: dict[str, str]) -> None:
    """Remember the op type of each node of a model being executed (while a profiler collects)."""
    names = op_names_of(runtime.api_records)
    if names is not None:
        names.note_op_types(op_types)
