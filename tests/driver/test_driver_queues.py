"""SQ/CQ rings behind the driver: packed SQEs in, completion reports out, task_send never waits.

These tests speak to the driver the way the runtime does: integers and bytes only.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from cannrt.abi import (
    EVENT_SQE,
    KERNEL_SQE,
    SQE_BYTES,
    WR_CQE,
    CoreKind,
    EventMode,
    SqeType,
    TensorArg,
    decode_cqes,
    pack_params,
)
from cannrt.config import ChipSpec, Settings
from cannrt.driver.hal import Driver, Resource
from cannrt.errors import CannError
from cannrt.kernels import Kernel, Work, register_kernel

STREAM_ID = 5
SPIN_PC_ARGS = 512  # one parameter slot per task


class Session:
    """One device opened through the driver with an address space, a CQ and one SQ."""

    def __init__(self, depth: int = 64) -> None:
        self.driver = Driver(Settings(device_count=1, chip=ChipSpec(sq_depth=depth), watchdog_s=10.0))
        self.driver.open(0)
        self.asid = self.driver.space_create(0)
        self.cq = self.driver.cq_alloc(0)
        self.sq = self.driver.sq_alloc(0, STREAM_ID, self.asid, 0, self.cq)
        self.params = self.driver.mem_alloc(self.asid, 1 << 20, 1 << 20, False)
        self.tasks = 0
        self.now_ns = 0  # the host clock of this test: the driver is told it, never keeps one

    def event_sqe(self, sqe_type: int, event_id: int = 1, value: int = 1, flags: int = WR_CQE) -> bytes:
        data: bytes = EVENT_SQE.pack(sqe_type, flags, 0, STREAM_ID, self.tasks, event_id, EventMode.TIMELINE, value)
        return data

    def send(self, sqe: bytes, param_va: int = 0, params: bytes = b"") -> int:
        position = self.driver.task_send(0, self.sq, sqe, self.now_ns, param_va, params)
        self.tasks += len(sqe) // SQE_BYTES
        return position

    def send_kernel(self, name: str, args: list[Any], block_dim: int = 1, flags: int = WR_CQE) -> int:
        pc = self.driver.kernel_load(0, name)
        params = pack_params(args)
        param_va = self.params + (self.tasks % 2048) * SPIN_PC_ARGS
        sqe = KERNEL_SQE.pack(
            SqeType.KERNEL,
            flags,
            block_dim,
            STREAM_ID,
            self.tasks,
            0,
            0,
            1,
            CoreKind.AICORE,
            len(params),
            pc,
            param_va,
        )
        return self.send(sqe, param_va, params)

    def wait(self, position: int, timeout_ns: int | None = 10**12) -> bool:
        result = self.driver.sq_wait(0, self.sq, position, self.now_ns, timeout_ns)
        self.now_ns = result.now_ns
        return result.done

    def reports(self) -> list[Any]:
        return decode_cqes(self.driver.report_receive(0, self.cq, 1 << 16, self.now_ns))

    def close(self) -> None:
        self.driver.close_all()


@pytest.fixture
def session() -> Iterator[Session]:
    s = Session()
    yield s
    s.close()


def test_task_send_returns_consecutive_ring_positions(session: Session) -> None:
    positions = [session.send(session.event_sqe(SqeType.EVENT_RECORD, value=n + 1)) for n in range(5)]
    assert positions == [0, 1, 2, 3, 4]
    assert session.wait(5)
    assert session.driver.sq_head(0, session.sq, session.now_ns) == 5


def test_each_wr_cqe_task_posts_one_completion_report_in_completion_order(session: Session) -> None:
    for n in range(3):
        session.send(session.event_sqe(SqeType.EVENT_RECORD, value=n + 1))
    session.send(session.event_sqe(SqeType.EVENT_RECORD, value=9, flags=0))  # no report asked for
    assert session.wait(4)
    reports = session.reports()
    assert [(r.stream_id, r.task_id, r.error_code, r.sqe_type, r.sq_id) for r in reports] == [
        (STREAM_ID, n, 0, SqeType.EVENT_RECORD, session.sq) for n in range(3)
    ]
    assert [r.sq_head for r in reports] == [1, 2, 3]
    for earlier, later in itertools.pairwise(reports):
        assert earlier.start_ns <= earlier.end_ns <= later.start_ns
    assert session.reports() == []  # taken once


def test_the_device_event_slot_follows_records(session: Session) -> None:
    session.send(session.event_sqe(SqeType.EVENT_RECORD, event_id=3, value=7))
    session.wait(1)
    value, timestamp = session.driver.event_read(0, 3, session.now_ns)
    (report,) = session.reports()
    assert (value, timestamp) == (7, report.end_ns)


def test_an_sqe_type_the_device_cannot_run_completes_with_507009(session: Session) -> None:
    cond = bytes([SqeType.COND, 0]) + (0).to_bytes(2, "little") + STREAM_ID.to_bytes(2, "little") + bytes(58)
    session.send(cond)  # no WR_CQE: errors are reported anyway
    assert session.wait(1)
    (report,) = session.reports()
    assert (report.error_code, report.sqe_type, report.task_id) == (507009, SqeType.COND, 0)


def test_a_kernel_with_an_unknown_pc_fails_with_kernel_lookup(session: Session) -> None:
    sqe = KERNEL_SQE.pack(SqeType.KERNEL, WR_CQE, 1, STREAM_ID, 0, 0, 0, 0, 0, 0, 0xDEAD000, 0)
    session.send(sqe)
    session.wait(1)
    (report,) = session.reports()
    assert report.error_code == 507027
    assert session.driver.exceptions(0)[0].error_code == 507027


def test_a_ring_smaller_than_the_submission_wraps_around() -> None:
    small = Session(depth=8)
    try:
        positions = [small.send(small.event_sqe(SqeType.EVENT_RECORD, value=n + 1)) for n in range(50)]
        assert positions == list(range(50))
        assert small.wait(50)
        assert [r.task_id for r in small.reports()] == list(range(50))
        assert small.driver.event_read(0, 1, small.now_ns)[0] == 50
    finally:
        small.close()


def test_several_sqes_in_one_send_take_consecutive_positions(session: Session) -> None:
    batch = b"".join(session.event_sqe(SqeType.EVENT_RECORD, value=n + 1) for n in range(3))
    assert session.send(batch) == 0
    assert session.send(session.event_sqe(SqeType.EVENT_RECORD, value=4)) == 3
    assert session.wait(4)
    assert len(session.reports()) == 4


def test_task_send_returns_before_the_modelled_work_is_done(session: Session) -> None:
    session.send_kernel("spin", [10**9])  # one modelled second
    assert session.driver.sq_head(0, session.sq, session.now_ns) == 0
    assert session.reports() == []
    assert session.wait(1)
    (report,) = session.reports()
    assert report.end_ns - report.start_ns >= 10**9
    assert session.now_ns == report.end_ns  # the host wait ended at the completion it waited for


def test_task_send_returns_while_the_kernel_is_still_running_for_real(session: Session) -> None:
    entered, release = threading.Event(), threading.Event()

    def gate(out: np.ndarray) -> None:
        entered.set()
        release.wait(5)
        out[...] = 42

    register_kernel(
        Kernel("test_driver_gate", gate, lambda specs: Work(), lambda specs: None, outputs=(0,)), replace=True
    )
    out = session.driver.mem_alloc(session.asid, 64, 64, False)
    session.send_kernel("test_driver_gate", [TensorArg(out, 3, (1,))])
    assert not release.is_set()  # the kernel cannot have finished: we hold its gate
    assert session.driver.mem_read(session.asid, out, 4) == bytes(4)
    release.set()
    assert session.wait(1)
    assert entered.is_set()
    assert int.from_bytes(session.driver.mem_read(session.asid, out, 4), "little") == 42


def test_report_wait_times_out_on_the_modelled_clock(session: Session) -> None:
    start = session.now_ns
    assert session.driver.report_wait(0, session.cq, start, 5_000) == (False, start + 5_000)
    session.send(session.event_sqe(SqeType.EVENT_RECORD))
    assert session.driver.report_wait(0, session.cq, start, 10**9).done is True


def test_sq_wait_times_out_on_the_modelled_clock(session: Session) -> None:
    session.send_kernel("spin", [10**6])
    start = session.now_ns
    assert session.wait(1, timeout_ns=1000) is False
    assert session.now_ns == start + 1000
    assert session.wait(1) is True


def test_freeing_an_sq_with_discard_drops_work_that_has_not_run(session: Session) -> None:
    wait = EVENT_SQE.pack(SqeType.EVENT_WAIT, WR_CQE, 0, STREAM_ID, 0, 2, EventMode.TIMELINE, 1)  # never satisfied
    session.send(wait)
    session.send(session.event_sqe(SqeType.EVENT_RECORD, event_id=4, value=1))
    session.driver.sq_free(0, session.sq, discard=True)
    assert session.driver.event_read(0, 4, session.now_ns)[0] == 0  # the record behind the wait never ran
    assert session.driver.resource_alloc(0, Resource.SQ) == session.sq  # the SQ id is free again


# -- memory through the driver ----------------------------------------------------------------------
def test_driver_memory_errors_carry_runtime_codes(session: Session) -> None:
    driver = session.driver
    cases: list[tuple[Any, int]] = [
        (lambda: driver.mem_free(session.asid, 0x1234), 107017),
        (lambda: driver.mem_physical_alloc(0, 1 << 50, True), 207001),
        (lambda: driver.mem_physical_free(0, 999_999), 107017),
        (lambda: driver.mem_unmap(session.asid, 0x1000), 107017),
        (lambda: driver.mem_release(session.asid, 0x1000), 107017),
        (lambda: driver.mem_alloc(12345, 64, 64, False), 107002),
        (lambda: driver.mem_read(session.asid, session.params + (1 << 20), 4), 107000),
    ]
    for call, code in cases:
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == code, info.value


def test_reserve_map_unmap_release(session: Session) -> None:
    driver = session.driver
    va = driver.mem_reserve(session.asid, 4 << 20, 2 << 20, 0)
    assert va % (2 << 20) == 0
    handle = driver.mem_physical_alloc(0, 2 << 20, True)
    driver.mem_map(session.asid, va, 2 << 20, 0, handle)
    driver.mem_write(session.asid, va + 100, b"hello")
    assert driver.mem_read(session.asid, va + 100, 5) == b"hello"
    with pytest.raises(CannError) as info:
        driver.mem_read(session.asid, va + (2 << 20), 1)  # reserved but unmapped half
    assert info.value.code == 107000
    with pytest.raises(CannError):
        driver.mem_map(session.asid, va + (2 << 20), 4 << 20, 0, handle)  # larger than the handle
    driver.mem_unmap(session.asid, va)
    driver.mem_physical_free(0, handle)
    driver.mem_release(session.asid, va)
    assert driver.mem_info(0)[0] == driver.mem_info(0)[1] - (1 << 20)  # only the parameter area remains
