"""The user-space mapping of an SQ: what the runtime calls to write SQEs and ring the doorbell.

One producer at a time per SQ (the runtime serialises each stream's submissions). Writing an
SQE never waits for the device's execution, only (briefly) for a full ring to be fetched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.device.queues import TASK_ID_AT, TASK_ID_BYTES, SubmissionQueue, TailRegister

if TYPE_CHECKING:
    from cannrt.device.npu import Npu


def sq_sender(npu: Npu, sq: SubmissionQueue) -> Callable[[bytes, int, bytes], int]:
    """A function (sqe, param_va, params) -> position that writes one SQE (and its parameter
    block) and rings the doorbell."""
    ring = sq.ring
    arrivals = sq.arrival_ns
    depth = sq.depth
    clock = npu.clock
    doorbells = npu.doorbells
    executor = npu.executor
    space = npu.fabric.space(sq.asid)

    def send(sqe: bytes, param_va: int = 0, params: bytes = b"") -> int:
        position = sq.tail
        if position - sq.fetched >= depth:
            npu.wait_for_ring_space(sq, 1)
        if params:
            space.view(param_va, len(params), "write")[:] = memoryview(params)
        slot = position % depth
        ring[slot] = sqe
        arrivals[slot] = clock.now_ns
        sq.tail = position + 1
        if not sq.rung:  # one doorbell entry per SQ until the device fetches it
            sq.rung = True
            doorbells.append(sq)
        if executor.idle:
            executor.idle = False  # one wake per idle period, however long the burst
            executor.wake.set()
        if npu.host_waiters:
            with npu.lock:
                npu.lock.notify_all()
        return position

    return send


def sq_template_sender(
    npu: Npu, sq: SubmissionQueue, template: bytes, host_ns: int, lock: threading.Lock, tail: TailRegister
) -> Callable[[], int]:
    """A sender of one SQE `template` with each task id filled in: under the producer's
    lock it charges host_ns, writes the SQE, rings the doorbell and updates `tail` (the
    runtime's fast path for repeated parameterless launches; returns the position)."""
    ring, arrivals, depth = sq.ring, sq.arrival_ns, sq.depth
    clock, doorbells, executor = npu.clock, npu.doorbells, npu.executor
    prefix, suffix = template[:TASK_ID_AT], template[TASK_ID_AT + 2 :]
    task_ids = TASK_ID_BYTES
    acquire, release = lock.acquire, lock.release

    def send() -> int:
        acquire()
        try:
            position = sq.tail
            if position - sq.fetched >= depth:
                npu.wait_for_ring_space(sq, 1)
            now = clock.now_ns + host_ns
            clock.now_ns = now
            slot = position % depth
            ring[slot] = prefix + task_ids[position & 0xFFFF] + suffix
            arrivals[slot] = now
            sq.tail = tail.value = position + 1
            if not sq.rung:
                sq.rung = True
                doorbells.append(sq)
            if executor.idle:
                executor.idle = False
                executor.wake.set()
            if npu.host_waiters:
                with npu.lock:
                    npu.lock.notify_all()
        finally:
            release()
        return position

    return send
