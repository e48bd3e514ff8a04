"""Stateful fuzzing of the pyACL facade with hostile arguments (issue 13's acceptance).

Rules allocate, copy in and out, free, make streams and events, record, wait and synchronise
through `cannrt.acl`, with arguments of every Python type and out-of-range numbers. Whatever the
sequence: a call returns its code (or its outputs and a code) and never raises, except TypeError
for a wrong Python type; the codes are documented ones; every live buffer reads back what the
model says; after reset_device the HBM is all free again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import cannrt
import cannrt.acl as acl
from cannrt.acl._state import STATE
from cannrt.config import Settings

SIZE = 256  # bytes of each checked buffer
H2D, D2H = 1, 2
DOCUMENTED = {0, 100000, 107000, 107001, 107003, 107016, 107017, 107018, 107019, 207001, 507046, 507014}

hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=2),
    st.lists(st.integers(0, 3), max_size=2),
)


def code(result: Any) -> int:
    """The ret of a pyACL call's result (the last item of a tuple)."""
    return int(result[-1] if isinstance(result, tuple) else result)


def called(call: Any) -> int | None:
    """Run a pyACL call: its code (checked documented), or None for a TypeError."""
    try:
        result = call()
    except TypeError:
        return None
    ret = code(result)
    assert ret in DOCUMENTED, f"undocumented code {ret}"
    return ret


class HostileAcl(RuleBasedStateMachine):
    """pyACL calls under hostile arguments, with a model of every live buffer's bytes."""

    buffers = Bundle("buffers")

    @initialize()
    def start(self) -> None:
        if STATE.initialized:
            acl.finalize()
        cannrt.reset_runtime(Settings(device_count=2, watchdog_s=2.0))
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        self.stream, ret = acl.rt.create_stream()
        assert ret == 0
        self.model: dict[int, bytes] = {}

    @rule(target=buffers, seed=st.integers(0, 2**16))
    def allocate_and_fill(self, seed: int) -> int:
        ptr, ret = acl.rt.malloc(SIZE, 0)
        assert ret == 0
        host = np.random.default_rng(seed).integers(0, 256, SIZE, dtype=np.uint8)
        assert acl.rt.memcpy(ptr, SIZE, host.ctypes.data, SIZE, H2D) == 0
        self.model[ptr] = host.tobytes()
        return ptr

    @rule(size=hostile, policy=hostile)
    def malloc_hostile(self, size: Any, policy: Any) -> None:
        try:
            result = acl.rt.malloc(size, policy)
        except TypeError:
            return
        ptr, ret = result
        assert ret in DOCUMENTED
        assert (ptr == 0) == (ret != 0), "a failed call's output is 0"
        if ret == 0:
            assert acl.rt.free(ptr) == 0

    @rule(ptr=buffers, count=hostile, kind=hostile)
    def memcpy_hostile(self, ptr: int, count: Any, kind: Any) -> None:
        host = np.zeros(SIZE, np.uint8)
        ret = called(lambda: acl.rt.memcpy(host.ctypes.data, SIZE, ptr, count, kind))
        if ptr not in self.model:
            assert ret != 0
        elif ret == 0 and isinstance(count, int) and kind in (D2H, 0):
            assert host.tobytes()[:count] == self.model[ptr][:count]

    @rule(ptr=buffers, value=st.integers(0, 255))
    def memset_async(self, ptr: int, value: int) -> None:
        ret = called(lambda: acl.rt.memset_async(ptr, SIZE, value, SIZE, self.stream))
        if ptr in self.model:
            assert ret == 0
            self.model[ptr] = bytes([value]) * SIZE

    @rule(thing=hostile, timeout=st.one_of(hostile, st.sampled_from([math.nan, -1, 0, 5])))
    def events_and_waits_hostile(self, thing: Any, timeout: Any) -> None:
        event, ret = acl.rt.create_event_ex_with_flag(0x8)
        assert ret == 0
        called(lambda: acl.rt.record_event(event, thing))
        called(lambda: acl.rt.stream_wait_event(thing, event))
        called(lambda: acl.rt.synchronize_event_with_timeout(thing, timeout))
        called(lambda: acl.rt.synchronize_stream_with_timeout(self.stream, timeout))
        assert acl.rt.record_event(event, self.stream) == 0
        assert acl.rt.synchronize_event(event) == 0
        assert acl.rt.destroy_event(event) == 0

    @rule(ptr=buffers)
    def free(self, ptr: int) -> None:
        if self.model.pop(ptr, None) is not None:
            assert acl.rt.synchronize_stream(self.stream) == 0
            assert acl.rt.free(ptr) == 0
        else:
            assert acl.rt.free(ptr) != 0  # freed before: an error code, not a crash

    @invariant()
    def contents_are_right(self) -> None:
        if not hasattr(self, "model"):
            return
        assert acl.rt.synchronize_stream(self.stream) == 0
        for ptr, expected in self.model.items():
            host = np.zeros(SIZE, np.uint8)
            assert acl.rt.memcpy(host.ctypes.data, SIZE, ptr, SIZE, D2H) == 0
            assert host.tobytes() == expected

    def teardown(self) -> None:
        if not hasattr(self, "model"):
            return
        assert acl.rt.reset_device(0) == 0
        assert acl.rt.set_device(0) == 0
        free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        acl.rt.reset_device(0)
        acl.finalize()
        assert ret == 0 and free == total, f"{total - free} bytes of HBM held after reset"


HostileAcl.TestCase.settings = settings(
    max_examples=15, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck)
)
test_hostile_acl = HostileAcl.TestCase
