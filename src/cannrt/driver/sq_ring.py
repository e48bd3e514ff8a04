"""An SQ mapped into the runtime, as a real driver maps the ring and its doorbell register.

The runtime writes SQEs (and kernel parameter blocks) through it and nothing else: it never sees
the device's queue. One producer at a time per SQ (the runtime serialises a stream's
submissions). Writing never waits for the device's execution, only (briefly) for a full ring.
"""

from __future__ import annotations

from collections.abc import Callable

from cannrt.abi import TASK_ID_BYTES
from cannrt.device.memory import AddressSpace, DeviceFault
from cannrt.device.npu import Npu
from cannrt.device.queues import SubmissionQueue
from cannrt.device.sync import DeviceHang
from cannrt.errors import CannError, CannTimeout, ErrorCode


class SqRing:
    """The user-space view of one SQ: send an SQE (with or without a parameter block)."""

    __slots__ = (
        "_arrivals",
        "_depth",
        "_doorbells",
        "_npu",
        "_ring",
        "_space",
        "_sq",
        "_sync",
        "send_template",
        "sq_id",
    )

    def __init__(self, npu: Npu, sq: SubmissionQueue, space: AddressSpace) -> None:
        self.sq_id = sq.sq_id
        self._npu = npu
        self._sq = sq
        self._ring = sq.ring
        self._arrivals = sq.arrival_ns
        self._depth = sq.depth
        self._space = space  # the SQ's address space: parameter blocks are written there
        self._doorbells, self._sync = npu.doorbell_register()
        self.send_template = self._template_sender()

    def _template_sender(self) -> Callable[[bytes, bytes, int], int]:
        """send_template(prefix, suffix, arrival_ns): send the SQE prefix + task id + suffix,
        its task id the low 16 bits of its position (what a kept launch writes: all but the id
        is the same every time). A closure over the ring: the hottest call of every launch."""
        sq, ring, arrivals, depth, ids = self._sq, self._ring, self._arrivals, self._depth, TASK_ID_BYTES
        wait_for_space, ring_doorbell = self._wait_for_space, self._ring_doorbell

        def send_template(prefix: bytes, suffix: bytes, arrival_ns: int) -> int:
            position = sq.tail
            if position - sq.fetched >= depth:
                wait_for_space(arrival_ns)
            slot = position % depth
            ring[slot] = prefix + ids[position & 0xFFFF] + suffix
            arrivals[slot] = arrival_ns
            sq.tail = position + 1
            if not sq.rung:  # the doorbell: one entry per SQ until the device fetches it
                ring_doorbell(sq)
            return position

        return send_template

    @property
    def tail(self) -> int:
        """SQEs written so far: the position the next one takes."""
        return self._sq.tail

    def send(self, sqe: bytes, arrival_ns: int) -> int:
        """Write one 64-byte SQE that arrives at host time arrival_ns and ring the doorbell;
        returns its position. CannTimeout if the ring stays full past the watchdog."""
        sq = self._sq
        position = sq.tail
        depth = self._depth
        if position - sq.fetched >= depth:
            self._wait_for_space(arrival_ns)
        slot = position % depth
        self._ring[slot] = sqe
        self._arrivals[slot] = arrival_ns
        sq.tail = position + 1
        if not sq.rung:  # the doorbell: one entry per SQ until the device fetches it
            self._ring_doorbell(sq)
        return position

    def send_with_params(self, sqe: bytes, arrival_ns: int, param_va: int, params: bytes) -> int:
        """send, writing first the parameter block the SQE points at (once the ring has room
        for the SQE: the block it replaces belonged to an SQE fetched by then)."""
        sq = self._sq
        if sq.tail - sq.fetched >= self._depth:
            self._wait_for_space(arrival_ns)
        try:
            self._space.view(param_va, len(params), "write")[:] = memoryview(params)
        except DeviceFault as fault:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"parameter block: {fault}") from None
        return self.send(sqe, arrival_ns)

    def _ring_doorbell(self, sq: SubmissionQueue) -> None:
        sq.rung = True
        self._doorbells.append(sq)
        sync = self._sync  # who sleeps is woken once per doorbell: a rung one is fetched anyway
        if sync.idle or sync.host_waiters:
            sync.kick()

    def _wait_for_space(self, arrival_ns: int) -> None:
        """Wait for a free entry, then commit the timeline to just before the SQE arrives (strictly
        before: an SQE arriving then may still join it), so the tasks in flight stay a ring's
        worth, not a whole burst. A hang while waiting is a full ring; one while committing is a
        task that never finished, reported as a synchronize would."""
        try:
            self._npu.wait_for_ring_space(self._sq)
        except DeviceHang as exc:
            raise CannTimeout(ErrorCode.RT_STREAM_TASK_FULL, f"watchdog: {exc}") from None
        try:
            self._npu.catch_up(arrival_ns - 1)
        except DeviceHang as exc:
            raise CannTimeout(ErrorCode.RT_STREAM_SYNC_TIMEOUT, f"watchdog: {exc}") from None
