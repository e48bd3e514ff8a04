"""Stateful fuzzing of the Pythonic API with hostile arguments (issue 13's acceptance).

Rules make, fill, read back, launch on and free arrays, make streams and events, wait and
synchronise, each with arguments drawn from every Python type and from out-of-range numbers.
Whatever the sequence: the only exceptions are CannError (with a documented code) and TypeError
for a wrong Python type; every array reads back what the model says it holds; after a reset the
device's HBM is all free again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import cannrt
from cannrt import CannError, Device, DeviceArray, Stream
from cannrt.config import Settings
from cannrt.device.timeline import MAX_TASK_NS

DOCUMENTED = {107000, 107003, 107017, 207001, 507046, 507014}
SIZE = 64  # elements of the arrays the contents are checked on

hostile_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.lists(st.integers(-3, 3), max_size=3),
    st.just(object()),
)
hostile_shape = st.one_of(
    hostile_scalar,
    st.lists(st.integers(min_value=-4, max_value=2**63), min_size=0, max_size=3).map(tuple),
    st.lists(hostile_scalar, max_size=2).map(tuple),
)


def allowed(call: Any) -> Any:
    """Run call; a CannError must carry a documented code, a TypeError is a wrong Python type."""
    try:
        return call()
    except CannError as exc:
        assert exc.code in DOCUMENTED, f"undocumented code {exc.code}: {exc}"
    except TypeError:
        pass
    return None


class HostileApi(RuleBasedStateMachine):
    """The Pythonic API under hostile arguments, with a model of every live array's contents."""

    arrays = Bundle("arrays")

    @initialize()
    def start(self) -> None:
        self.runtime = cannrt.reset_runtime(Settings(device_count=2, watchdog_s=2.0))
        self.dev = Device(0)
        self.stream: Stream = self.dev.stream()
        self.model: dict[int, np.ndarray] = {}  # id(array) -> expected contents
        self.live: dict[int, DeviceArray] = {}

    @rule(target=arrays, seed=st.integers(0, 2**16))
    def make(self, seed: int) -> DeviceArray:
        values = np.random.default_rng(seed).integers(-100, 100, SIZE).astype(np.float32)
        array = self.dev.array(values, stream=self.stream)
        self.model[id(array)] = values
        self.live[id(array)] = array
        return array

    @rule(shape=hostile_shape, dtype=st.sampled_from([np.float32, np.int8, "float16", "nope", None, 3]))
    def make_hostile(self, shape: Any, dtype: Any) -> None:
        array = allowed(lambda: self.dev.empty(shape, dtype))
        if array is not None:
            assert array.nbytes >= 0
            array.free()

    @rule(
        array=arrays,
        data=st.one_of(
            hostile_scalar,
            st.just(np.zeros(3, np.float32)),
            st.integers(-50, 50).map(lambda v: np.full(SIZE, v, np.int64)),  # right size, cast on copy
        ),
    )
    def copy_in_hostile(self, array: DeviceArray, data: Any) -> None:
        if id(array) not in self.live:
            return
        if allowed(lambda: array.copy_from(data, self.stream) or True):
            self.model[id(array)] = np.asarray(data, np.float32).reshape(SIZE).copy()

    @rule(out=arrays, left=arrays, right=arrays, block_dim=st.one_of(st.integers(-2, 70000), hostile_scalar))
    def add(self, out: DeviceArray, left: DeviceArray, right: DeviceArray, block_dim: Any) -> None:
        ids = (id(out), id(left), id(right))
        launched = allowed(lambda: self.stream.launch("add", left, right, out, block_dim=block_dim) or True)
        if launched and all(i in self.live for i in ids):
            self.model[id(out)] = self.model[id(left)] + self.model[id(right)]

    @rule(value=hostile_scalar)
    def launch_hostile_scalar(self, value: Any) -> None:
        launched = allowed(lambda: self.stream.launch("spin", value) or True)
        if launched and value > MAX_TASK_NS:  # fails on the device: a sticky error until a reset
            try:
                self.stream.synchronize()
            except CannError as exc:
                assert exc.code == 507014
            else:
                raise AssertionError(f"spin {value} ns completed")
            self.dev.reset()
            self.start()

    @rule(timeout=st.one_of(hostile_scalar, st.sampled_from([math.nan, math.inf, -1, 0, 2**31, 10])))
    def synchronize(self, timeout: Any) -> None:
        allowed(lambda: self.stream.synchronize(timeout))

    @rule(thing=hostile_scalar)
    def events_with_hostile_arguments(self, thing: Any) -> None:
        allowed(lambda: self.stream.record(thing))
        allowed(lambda: self.stream.wait(thing))
        other = self.dev.stream()
        other.wait_stream(self.stream)
        other.destroy()

    @rule(priority=hostile_scalar, flags=hostile_scalar)
    def stream_with_hostile_config(self, priority: Any, flags: Any) -> None:
        stream = allowed(lambda: self.dev.stream(priority, flags))
        if stream is not None:
            stream.destroy()

    @rule(array=arrays)
    def free(self, array: DeviceArray) -> None:
        if self.live.pop(id(array), None) is not None:
            self.stream.synchronize()  # the pool reuses it on another stream order otherwise
            array.free()
            del self.model[id(array)]

    @invariant()
    def contents_are_right(self) -> None:
        if not hasattr(self, "live"):
            return
        for key, array in self.live.items():
            if array.freed:
                continue
            got = allowed(lambda a=array: a.to_numpy(self.stream))
            assert got is not None, "a read back failed"
            np.testing.assert_array_equal(got, self.model[key])

    def teardown(self) -> None:
        if not hasattr(self, "dev"):
            return
        self.dev.reset()
        free, total = Device(0).mem_info()
        self.runtime.close()
        assert free == total, f"{total - free} bytes of HBM held after reset"


HostileApi.TestCase.settings = settings(
    max_examples=15, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck)
)
test_hostile_api = HostileApi.TestCase
