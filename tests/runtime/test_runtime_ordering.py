"""Ordering verified by content: 8 streams x 1000 tasks each append to a device-side log, so any
reordering (within a stream, or across streams chained by events) shows up in the log."""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cannrt.abi import SqeType
from cannrt.kernels import Kernel, Work, register_kernel

if TYPE_CHECKING:
    from cannrt.abi import TensorArg
    from conftest import Npu

STREAMS = 8
TASKS = 1000


def _append(counter: np.ndarray, log: np.ndarray, value: int) -> None:
    """log[counter] = value; counter += 1 (a device-side append-only log)."""
    log[counter[0]] = value
    counter[0] += 1


@pytest.fixture(autouse=True)
def _append_kernel() -> None:
    register_kernel(
        Kernel("test_append", _append, lambda specs: Work(fixed_ns=200), lambda specs: None, outputs=(0, 1)),
        replace=True,
    )


class Log:
    """A device counter and a log of int64 entries."""

    def __init__(self, npu: Npu, entries: int) -> None:
        self.npu = npu
        self.entries = entries
        self.counter_va = npu.malloc(8)
        self.log_va = npu.malloc(entries * 8)
        self.counter: TensorArg = npu.tensor(self.counter_va, (1,), np.int64)
        self.log: TensorArg = npu.tensor(self.log_va, (entries,), np.int64)

    def contents(self) -> np.ndarray:
        count = int(self.npu.download(self.counter_va, 1, np.int64)[0])
        return self.npu.download(self.log_va, self.entries, np.int64)[:count]


def test_eight_streams_of_a_thousand_tasks_each_run_in_submission_order(npu: Npu) -> None:
    ctx = npu.ctx()
    streams = [ctx.create_stream() for _ in range(STREAMS)]
    logs = [Log(npu, TASKS) for _ in range(STREAMS)]
    npu.trace()
    for task in range(TASKS):  # interleave submissions across streams
        for index, stream in enumerate(streams):
            npu.launch(stream, "test_append", logs[index].counter, logs[index].log, index * 1_000_000 + task)
    for stream in streams:
        stream.synchronize(timeout_ms=1000)
    for index, log in enumerate(logs):
        assert log.contents().tolist() == [index * 1_000_000 + t for t in range(TASKS)]
    kernels = [r for r in npu.records() if r.sqe_type == SqeType.KERNEL]
    assert len(kernels) == STREAMS * TASKS
    for stream in streams:  # the modelled timeline agrees: in order, never overlapping
        mine = [r for r in kernels if r.stream_id == stream.stream_id]
        assert [r.task_id for r in mine] == list(range(TASKS))
        assert all(b.start_ns >= a.end_ns for a, b in itertools.pairwise(mine))


def test_a_token_passed_round_robin_by_events_orders_eight_streams_into_one_log(npu: Npu) -> None:
    """Task k runs on stream k % 8 and waits for task k-1 (on the previous stream) through an event
    re-recorded after every append: the shared log must read 0, 1, ..., 999."""
    ctx = npu.ctx()
    streams = [ctx.create_stream() for _ in range(STREAMS)]
    done = [ctx.create_event() for _ in range(STREAMS)]
    log = Log(npu, TASKS)
    for task in range(TASKS):
        index = task % STREAMS
        if task:
            done[(task - 1) % STREAMS].wait_on(streams[index])  # the newest record: task - 1
        npu.launch(streams[index], "test_append", log.counter, log.log, task)
        done[index].record(streams[index])
    npu.rt.synchronize_device(0, timeout_ms=1000)
    assert log.contents().tolist() == list(range(TASKS))


def test_threads_sharing_the_default_stream_each_keep_their_order(npu: Npu) -> None:
    """The default stream is shared by every thread using the context: concurrent submissions all
    land, and each thread's tasks run in the order that thread submitted them."""
    ctx = npu.ctx()
    threads, per_thread = 4, 500
    log = Log(npu, threads * per_thread)
    errors: list[BaseException] = []

    def submit(index: int) -> None:
        try:
            npu.rt.set_context(ctx)
            stream = npu.rt.current_context().default_stream
            for task in range(per_thread):
                npu.launch(stream, "test_append", log.counter, log.log, index * 1_000_000 + task)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=submit, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert errors == [] and not any(w.is_alive() for w in workers)
    ctx.default_stream.synchronize(timeout_ms=1000)
    entries = log.contents().tolist()
    assert len(entries) == threads * per_thread == ctx.default_stream.tail
    for index in range(threads):
        assert [v for v in entries if v // 1_000_000 == index] == [index * 1_000_000 + t for t in range(per_thread)]
