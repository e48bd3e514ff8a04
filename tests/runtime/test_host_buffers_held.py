"""Host memory a queued copy uses lives until the copy ran, whatever the wait did (issue 13, item 3)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import numpy as np
import pytest

from cannrt import CannError, Device
from cannrt.runtime.core import Runtime


def test_to_numpy_whose_synchronize_fails_keeps_its_buffer_until_the_copy_ran(
    make_runtime: Callable[..., Runtime],
) -> None:
    """The stream waits on a legacy event nobody recorded yet: to_numpy's synchronize hits the
    watchdog with the copy still queued. Host arrays made afterwards are never written by it."""
    make_runtime(watchdog_s=0.3)
    dev = Device(0)
    stream, other = dev.stream(), dev.stream()
    source = dev.array(np.full(1024, 3.0, np.float32))
    blocker = dev.legacy_event()
    stream.wait(blocker)
    with pytest.raises(CannError) as failed:
        source.to_numpy(stream)
    assert failed.value.code == 507046
    gc.collect()
    fillers = [np.full(1024, 5.0, np.float32) for _ in range(64)]  # where a freed buffer is reused
    other.record(blocker)
    stream.synchronize()
    assert all((filler == 5.0).all() for filler in fillers)


def test_a_held_host_buffer_is_released_once_its_copy_completed(make_runtime: Callable[..., Runtime]) -> None:
    make_runtime()
    dev = Device(0)
    stream = dev.stream()
    array = dev.array(np.arange(256, dtype=np.float32))
    target = np.empty(256, np.float32)
    array.copy_to(target, stream)
    alive = weakref.ref(target)
    del target
    gc.collect()
    assert alive() is not None  # the queued copy still holds it
    stream.synchronize()
    gc.collect()
    assert alive() is None
