"""Facade state and the calling convention every pyACL call follows.

`api` wraps a call: argument types are checked first (TypeError, as pyACL's argument parsing
raises it); anything else that goes wrong becomes an error code, is remembered as the thread's
last error (peek_at_last_error / get_last_error / get_recent_err_msg) and leaves the runtime
usable. Calls with outputs return `(out..., ret)`, calls without return `ret`.
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from cannrt.acl._handles import HandleTable, Kind
from cannrt.errors import CannError, ErrorCode, error_name

if TYPE_CHECKING:
    from cannrt.api.dump import DumpSession
    from cannrt.runtime.context import Context
    from cannrt.runtime.core import Runtime
    from cannrt.runtime.event import Event
    from cannrt.runtime.stream import Stream

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class ArgTypeError(TypeError):
    """A wrong argument type: the only exception a pyACL call lets out."""


@dataclass
class EventEntry:
    """A runtime event plus what the facade knows about its use."""

    event: Event
    timing: bool  # elapsed time / timestamps allowed
    waits: list[tuple[Stream, int]] = field(default_factory=list)  # (stream, position of its wait task)


class _ThreadErrors(threading.local):
    last_error: int = 0
    message: str = ""


class FacadeState:
    """Everything the pyACL facade keeps between calls (one per process)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.initialized = False
        self.finalized = False  # finalize ran since the last init
        self.runtime: Runtime | None = None
        self.errors = _ThreadErrors()
        self.contexts: HandleTable[Context] = HandleTable(Kind.CONTEXT)
        self.streams: HandleTable[Stream] = HandleTable(Kind.STREAM)
        self.events: HandleTable[EventEntry] = HandleTable(Kind.EVENT)
        self.op_wait_timeout_s = 0
        self.op_execute_timeout_s = 0
        self.saturation = False  # aclrtSetDeviceSatMode(SATURATION) in force
        self.dump: DumpSession | None = None  # from the "dump" section of acl.init's acl.json

    def flush_dump(self) -> None:
        """Write the dump files of every task completed so far (if acl.json asked for a dump)."""
        if self.dump is not None:
            self.dump.flush()

    def clear(self) -> None:
        """Forget every runtime object handle (finalize)."""
        self.contexts.clear()
        self.streams.clear()
        self.events.clear()
        self.op_wait_timeout_s = 0
        self.op_execute_timeout_s = 0
        self.saturation = False

    def forget_device(self, device_id: int) -> None:
        """Drop handles of objects that lived on a reset device."""
        self.contexts.remove_where(lambda c: c.device_id == device_id)
        self.streams.remove_where(lambda s: s.device_id == device_id)
        self.events.remove_where(lambda e: e.event.device_id == device_id)


STATE = FacadeState()
FINALIZERS: list[Callable[[], None]] = []


def on_finalize(fn: Callable[[], None]) -> Callable[[], None]:
    """Register fn to run at acl.finalize (modules drop their handles there)."""
    FINALIZERS.append(fn)
    return fn


def record_error(code: int, message: str) -> int:
    """Remember a failed call's code and message for this thread; returns code."""
    STATE.errors.last_error = code
    STATE.errors.message = f"{error_name(code)}({code}): {message}"
    if os.environ.get("CANNRT_ACL_LOG"):
        print(f"[cannrt.acl] {STATE.errors.message}", file=sys.stderr)
    return code


def _failure_code(exc: Exception) -> int:
    code = getattr(exc, "code", None)
    if isinstance(code, int) and code:
        return code
    return int(ErrorCode.INTERNAL_ERROR)


def api(*defaults: object) -> Callable[[F], F]:
    """Wrap a pyACL call; defaults are the outputs returned (before ret) when it fails.

    Every argument annotated int or str is parsed before the call's body runs, as pyACL's
    PyArg_ParseTuple parses them all first: a wrong type raises TypeError before any other check,
    even before init; a well-typed call then gets ACL_ERROR_UNINITIALIZE.
    """

    def wrap(fn: F) -> F:
        parsers = _argument_parsers(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for index, (name, parse) in enumerate(parsers):
                value = args[index] if index < len(args) else kwargs.get(name)
                if parse is not None and value is not None:
                    parse(name, value)
            try:
                result = fn(*args, **kwargs)
            except ArgTypeError:
                raise
            except Exception as exc:  # every failure becomes a code; the runtime stays usable
                detail = exc.detail if isinstance(exc, CannError) else f"{type(exc).__name__}: {exc}"
                code = record_error(_failure_code(exc), f"{fn.__name__}: {detail}")
                return (*defaults, code) if defaults else code
            if not defaults:
                return 0
            return (*result, 0) if len(defaults) > 1 else (result, 0)

        return call  # type: ignore[return-value]

    return wrap


def _argument_parsers(fn: Callable[..., Any]) -> list[tuple[str, Callable[[str, object], object] | None]]:
    """Per positional parameter of fn: its name and the parser of its annotated type (int or str;
    None handles count as the null handle), None for other annotations."""
    parsers: dict[str, Callable[[str, object], object]] = {"int": as_int, "str": as_str}
    return [
        (parameter.name, parsers.get(str(parameter.annotation)))
        for parameter in inspect.signature(fn).parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]


def fail(code: int, message: str) -> CannError:
    """An error to raise inside an api call."""
    return CannError(code, message)


# -- argument types (pyACL's PyArg_ParseTuple raises TypeError) ---------------------------------
def as_int(name: str, value: object) -> int:
    """An int argument (Python or numpy integer); TypeError otherwise."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float | str | bytes) or not hasattr(value, "__index__"):
        raise ArgTypeError(f"{name} must be an int, not {type(value).__name__}")
    return operator.index(value)


def as_handle(name: str, value: object) -> int:
    """A pointer/handle argument: an int, or None for the null handle."""
    return 0 if value is None else as_int(name, value)


def require(table: HandleTable[T], name: str, value: object, what: str, code: int = ErrorCode.INVALID_PARAM) -> T:
    """The object behind handle argument `name`; `code` ("... is not `what`") otherwise."""
    found = table.get(as_handle(name, value))
    if found is None:
        raise fail(code, f"{value!r} is not {what}")
    return found


def as_str(name: str, value: object) -> str:
    """A str argument."""
    if not isinstance(value, str):
        raise ArgTypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def as_callable(name: str, value: object) -> Callable[..., Any]:
    """A Python function argument."""
    if not callable(value):
        raise ArgTypeError(f"{name} must be callable, not {type(value).__name__}")
    return value


def as_int_list(name: str, value: object) -> list[int]:
    """A list (or tuple, or 1-D array) of ints."""
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise ArgTypeError(f"{name} must be a list of int, not {type(value).__name__}")
    return [as_int(f"{name}[{i}]", v) for i, v in enumerate(value)]


def as_list(name: str, value: object) -> list[Any]:
    """A list or tuple argument."""
    if not isinstance(value, list | tuple):
        raise ArgTypeError(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


INT32_MAX = 2**31 - 1  # timeouts are int32_t in AscendCL


def as_timeout(value: int) -> int | None:
    """A pyACL timeout in ms: -1 waits forever, 0..INT32_MAX is a limit; anything else is invalid."""
    if not -1 <= value <= INT32_MAX:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"timeout must be -1 (forever) or 0..{INT32_MAX} ms, got {value}")
    return None if value == -1 else value


# -- lookups --------------------------------------------------------------------------------
def runtime() -> Runtime:
    """The runtime behind the facade (only while initialised)."""
    if STATE.runtime is None or not STATE.initialized:
        raise fail(ErrorCode.UNINITIALIZE, "acl.init has not been called")
    return STATE.runtime


def current_context(*, sticky: bool = True) -> Context:
    """The calling thread's context; its sticky device error is raised first when asked."""
    context = runtime().current_context()
    if sticky:
        context.check_sticky()
    return context


def context_of(handle: int) -> Context:
    """The context behind a handle."""
    runtime()
    if handle == 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, "context handle is null")
    context = STATE.contexts.get(handle)
    if context is None or context.destroyed:
        raise fail(ErrorCode.RT_INVALID_HANDLE, f"0x{handle:x} is not a live context")
    return context


def stream_of(handle: int, *, submit: bool = False) -> Stream:
    """The stream behind a handle (0/None: the current context's default stream).

    With submit, the stream must belong to the calling thread's context (work is enqueued).
    """
    runtime()
    if handle == 0:
        return current_context(sticky=submit).default_stream
    stream = STATE.streams.get(handle)
    if stream is None or stream.destroyed:
        raise fail(ErrorCode.RT_INVALID_HANDLE, f"0x{handle:x} is not a live stream")
    if submit:
        context = current_context()
        if stream.context is not context:
            raise fail(
                ErrorCode.RT_STREAM_CONTEXT,
                f"stream 0x{handle:x} belongs to a context on device {stream.device_id}, not the current one",
            )
    return stream


def event_of(handle: int) -> EventEntry:
    """The event behind a handle."""
    runtime()
    if handle == 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, "event handle is null")
    entry = STATE.events.get(handle)
    if entry is None or entry.event.destroyed:
        raise fail(ErrorCode.RT_INVALID_HANDLE, f"0x{handle:x} is not a live event")
    return entry
