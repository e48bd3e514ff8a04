"""Shared moves of the planted-fault tests: plant a fault, read its report, and check what must
hold after any fault (the code at the next sync, the sticky context, other contexts and devices
unaffected, reset_device recovers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from cannrt import CannError

if TYPE_CHECKING:
    from cannrt.abi import ExceptionRecord
    from cannrt.runtime.context import Context
    from cannrt.runtime.stream import Stream
    from conftest import Npu


def sync_error(stream: Stream) -> CannError:
    """The error the next synchronize of stream raises (it must raise, within the bound)."""
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=1000)
    return info.value


def only_record(ctx: Context) -> ExceptionRecord:
    """The one exception record the context received."""
    (record,) = ctx.exception_records
    return record


def line_of(function: object, text: str) -> int:
    """The line number of the first line of function's source holding text."""
    import inspect

    lines, first = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return first + next(i for i, line in enumerate(lines) if text in line)


def check_after_fault(npu: Npu, ctx: Context, code: int) -> None:
    """Sticky until reset; another context and another device unaffected; reset recovers."""
    with pytest.raises(CannError) as info:
        ctx.create_stream()
    assert info.value.code == code
    other = npu.rt.create_context(0)  # another context on the faulted device
    stream = other.create_stream()
    npu.spin(stream, 100)
    stream.synchronize(timeout_ms=100)
    npu.rt.set_context(ctx)
    device1 = npu.ctx(1).create_stream()
    npu.spin(device1, 100)
    device1.synchronize(timeout_ms=100)
    npu.rt.reset_device(0)
    fresh = npu.ctx(0)
    assert fresh.sticky_code == 0
    data = np.arange(8, dtype=np.float32)
    va = npu.upload(data)
    stream = fresh.create_stream()
    npu.launch(stream, "relu", npu.tensor(va, (8,), np.float32), npu.tensor(va, (8,), np.float32))
    stream.synchronize(timeout_ms=100)
    assert np.array_equal(npu.download(va, 8, np.float32), data)
