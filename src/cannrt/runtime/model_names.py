"""The ONNX node behind each task a model execute sent while a profiler collects, so that profiles
name model ops by node and op type (msprof's Op Name / OP Type) instead of by kernel."""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cannrt.abi import TaskRecord
    from cannrt.runtime.core import Runtime

TaskKey = tuple[int, int, int]  # (device, stream id, task id)
_tables: weakref.WeakKeyDictionary[Runtime, dict[TaskKey, deque[tuple[str, str]]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def note(runtime: Runtime, device: int, stream_id: int, position: int, node: str, op_type: str) -> None:
    """Remember that the task at position of the stream runs node (of op_type)."""
    with _lock:
        table = _tables.setdefault(runtime, {})
        table.setdefault((device, stream_id, position & 0xFFFF), deque()).append((node, op_type))


def named(runtime: Runtime, records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The records with model tasks renamed to their node and op type (in order, as noted); forgets
    what it used."""
    with _lock:
        table = _tables.pop(runtime, {})
    result = []
    for record in records:
        names = table.get((record.device_id, record.stream_id, record.task_id))
        if names:
            node, op_type = names.popleft()
            record = record._replace(name=node, op_type=op_type)
        result.append(record)
    return result
