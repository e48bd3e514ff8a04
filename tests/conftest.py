"""Shared fixtures: every test that touches the simulated machine gets a fresh runtime.

`rt` is a fresh Runtime (closed afterwards); `npu` wraps it with small helpers for the usual
moves of a test: set a device, make streams, put bytes on the device and read them back, launch a
kernel, and collect the modelled task records. `make_runtime(...)` builds a runtime with other
Settings (small limits, disabled cores, a short watchdog) and closes it afterwards. `acl` is the
pyACL facade initialised on a fresh default runtime, `device` device 0 of one.

The watchdog (a wall-clock limit on any real wait) is kept short so that a hang turns into an
error quickly instead of stalling the suite; no test waits without a bound.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import cannrt
from cannrt.abi import CopyKind, TaskRecord
from cannrt.acl._state import STATE
from cannrt.config import Settings
from cannrt.dtypes import acl_code
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context
from cannrt.runtime.core import Runtime, tensor_arg
from cannrt.runtime.stream import Stream

TEST_WATCHDOG_S = 10.0  # wall-clock bound on any real wait inside the simulator
# exception dumps (written on every fault, as CANN does) never land in the work tree: the child
# processes of session fixtures inherit this, and each test gets its own folder below
os.environ.setdefault("ASCEND_WORK_PATH", tempfile.mkdtemp(prefix="cannrt-ascend-work-"))


def settings_for_tests(**overrides: Any) -> Settings:
    """Default Settings for tests: two 910B1 devices and a short watchdog; fields may be overridden."""
    return dataclasses.replace(Settings(device_count=2, watchdog_s=TEST_WATCHDOG_S), **overrides)


@pytest.fixture
def make_runtime() -> Iterator[Callable[..., Runtime]]:
    """A factory: make_runtime(**settings_overrides) -> a fresh process-wide Runtime, closed at teardown."""
    made: list[Runtime] = []

    def factory(**overrides: Any) -> Runtime:
        runtime = cannrt.reset_runtime(settings_for_tests(**overrides))
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        if not runtime.closed:
            runtime.close()


@pytest.fixture
def rt(make_runtime: Callable[..., Runtime]) -> Runtime:
    """A fresh runtime with the test settings (2 devices, 910B1)."""
    return make_runtime()


class Npu:
    """Helpers over one runtime: the vocabulary the runtime tests are written in."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    @property
    def driver(self) -> Any:
        return self.rt.driver

    @property
    def now_ns(self) -> int:
        """The modelled host clock."""
        return self.rt.host_time_ns

    def ctx(self, device: int = 0) -> Context:
        """Set the device (its default context becomes current) and return the context."""
        return self.rt.set_device(device)

    def stream(self, device: int = 0, priority: int = 0) -> Stream:
        """A new stream in the device's default context."""
        return self.ctx(device).create_stream(priority)

    def malloc(self, nbytes: int, device: int = 0) -> int:
        """Device memory in the device's default context."""
        return memory_ops.malloc(self.ctx(device), nbytes)

    def upload(self, array: np.ndarray, device: int = 0) -> int:
        """A new device buffer holding array's bytes (synchronous H2D copy)."""
        context = self.ctx(device)
        data = np.ascontiguousarray(array)
        va = memory_ops.malloc(context, max(1, data.nbytes))
        if data.nbytes:
            kind = CopyKind.HOST_TO_DEVICE
            memory_ops.memcpy(context, va, data.nbytes, data.ctypes.data, data.nbytes, kind)
        return va

    def read(self, va: int, nbytes: int, device: int = 0) -> bytes:
        """Device bytes as they are now, read through the driver (bypasses streams and sticky errors)."""
        context = self.rt.devices[device].default_context
        data: bytes = self.rt.driver.mem_read(context.asid, va, nbytes)
        return data

    def download(self, va: int, shape: tuple[int, ...] | int, dtype: Any, device: int = 0) -> np.ndarray:
        """A synchronous D2H copy into a new numpy array."""
        context = self.ctx(device)
        host = np.empty(shape, dtype=dtype)
        memory_ops.memcpy(context, host.ctypes.data, host.nbytes, va, host.nbytes, CopyKind.DEVICE_TO_HOST)
        return host

    @staticmethod
    def tensor(va: int, shape: tuple[int, ...], dtype: Any) -> Any:
        """A kernel tensor argument."""
        return tensor_arg(va, acl_code(np.dtype(dtype)), shape)

    def launch(self, stream: Stream, kernel: str, *args: Any, block_dim: int = 1) -> int:
        """Enqueue a kernel; returns its position on the stream."""
        return self.rt.launch(stream, kernel, block_dim, list(args))

    def spin(self, stream: Stream, ns: int, block_dim: int = 1) -> int:
        """A kernel that only occupies block_dim cores for ns of modelled time."""
        return self.launch(stream, "spin", ns, block_dim=block_dim)

    def trace(self, device: int = 0) -> None:
        """Start keeping a record of every task of the device."""
        self.ctx(device)
        self.rt.driver.trace_start(device)

    def records(self, device: int = 0) -> list[TaskRecord]:
        """Stop tracing; the records committed so far (call after synchronising)."""
        records: list[TaskRecord] = self.rt.driver.trace_stop(device, self.rt.host_time_ns)
        return records


@pytest.fixture
def npu(rt: Runtime) -> Npu:
    """Helpers over a fresh runtime (device 0 is set)."""
    helper = Npu(rt)
    helper.ctx(0)
    return helper


class ReportThread:
    """A host thread looping on process_report (bounded waits) for subscribed streams."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.ident = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._loop, name="test-report-thread", daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _loop(self) -> None:
        self.ident = threading.get_ident()
        self.ready.set()
        while not self.stop.is_set():
            try:
                self.rt.callbacks.process(20)
            except cannrt.CannError as exc:
                if exc.code not in (cannrt.ErrorCode.WAIT_CALLBACK_TIMEOUT, cannrt.ErrorCode.RT_THREAD_SUBSCRIBE):
                    self.errors.append(exc)
                if exc.code == cannrt.ErrorCode.RT_THREAD_SUBSCRIBE:
                    self.stop.wait(0.01)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def report_thread(rt: Runtime) -> Iterator[ReportThread]:
    """A running report thread (subscribe streams to report_thread.ident)."""
    thread = ReportThread(rt)
    yield thread
    thread.close()


__all__ = ["Npu", "ReportThread", "settings_for_tests"]


@pytest.fixture(autouse=True)
def _exception_dumps_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exception dumps (written on every fault, as CANN does) go to a temporary folder."""
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path_factory.mktemp("ascend_work")))


@pytest.fixture
def acl() -> Iterator[ModuleType]:
    """cannrt.acl initialised on a fresh default runtime with device 0 set; finalized afterwards."""
    import cannrt.acl as facade

    if STATE.initialized:
        facade.finalize()
    cannrt.reset_runtime(Settings(watchdog_s=TEST_WATCHDOG_S))
    assert facade.init() == 0
    assert facade.rt.set_device(0) == 0
    try:
        yield facade
    finally:
        if STATE.initialized:
            facade.finalize()


@pytest.fixture
def device() -> Iterator[cannrt.Device]:
    """Device 0 of a fresh default runtime (the Pythonic API's), closed afterwards."""
    runtime = cannrt.reset_runtime(Settings(watchdog_s=TEST_WATCHDOG_S))
    yield cannrt.Device(0)
    runtime.close()
