"""Host API records for the profiler: which runtime call ran when, on the modelled host clock.

Calls that submit tasks (launch, async copies, event record/wait) are not wrapped: their host
slices come from the device records (doorbell time minus the call's modelled cost), which keeps
the launch path free of tracing cost. The wrapper below serves the other calls.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class ApiRecord(NamedTuple):
    """One host API call: its ACL name, modelled host start/end (ns) and the calling thread."""

    name: str
    start_ns: int
    end_ns: int
    thread_id: int


def _runtime_of(owner: Any) -> Any:
    """The Runtime reachable from a call's first argument (context, stream, event or runtime)."""
    for path in ("runtime", "context"):
        found = getattr(owner, path, None)
        if found is not None:
            return found if path == "runtime" else found.runtime
    return owner


def api_call(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Record calls of the wrapped function under `name` while a profiler is collecting."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            runtime = _runtime_of(args[0]) if args else None
            records = getattr(runtime, "api_records", None)
            if records is None:
                return function(*args, **kwargs)
            clock = runtime.clock  # type: ignore[union-attr]
            start = clock.now_ns
            try:
                return function(*args, **kwargs)
            finally:
                records.append(ApiRecord(name, start, clock.now_ns, threading.get_ident()))

        return traced

    return wrap
