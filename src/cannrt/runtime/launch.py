"""The launch path of one stream (aclrtLaunchKernel), the same for every kernel.

A launch shape is (kernel, blockDim, arguments, dump flags). The first launch of a shape checks
the arguments against the kernel, packs its parameter block and its SQE in one step and keeps
them; every later launch of the shape only fills in the task id and sends. The parameter block
is written once into a slot of the stream's argument area and every launch of the shape points
at it.

Policy of the argument area: `depth` slots of MAX_PARAM_BYTES (one per SQ entry), one per kept
shape with arguments; a new shape takes a fresh slot, else the slot launched longest ago (of a
dropped shape, or of the least recently used one). That is safe without asking the device: the
other depth - 1 slots were each launched later, at distinct positions, so the new launch's
position is at least depth past the slot's last launch, and the ring has room for it only once
that launch was fetched (the device reads a parameter block when it fetches the SQE).

Every kept shape has a sender (a closure with everything bound), found by the launch key: the
arguments themselves when all are tensors, else their signature (1, 1.0, True and 0.0, -0.0
are equal but pack differently); a caller that repeats a launch (a model's replay) holds one
with prepare(). Every launch while dumping goes through the checks below. The senders are
dropped whenever a launch could need the checks again: the stream destroyed or its context
sticky with an error, dumping switched on or off (the runtime tells every stream); a held
launch sees that by the epoch. A sender itself hands its launch back to the checks once a
kernel was registered or replaced (the registry's generation moved) or its shape was dropped
(its slot may be another's by then).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.abi import (
    DUMP,
    KERNEL_SQE,
    MAX_PARAM_BYTES,
    TASK_ID_AT,
    TASK_ID_BYTES,
    DescriptorError,
    ParamValue,
    SqeType,
    TensorArg,
    pack_params,
)
from cannrt.abi.params import check_tensor_sizes
from cannrt.errors import CannError, ErrorCode
from cannrt.kernels import KernelArgumentError
from cannrt.kernels.registry import GENERATION, Kernel, current_kernel
from cannrt.runtime.tracing import note_op_name

if TYPE_CHECKING:
    from cannrt.driver.sq_ring import SqRing
    from cannrt.runtime.host_clock import HostClock
    from cannrt.runtime.stream import Stream
    from cannrt.runtime.submit_lock import SubmitLock

MAX_BLOCK_DIM = 65535
MAX_SHAPES_PER_DEPTH = 4  # kept shapes (with or without arguments) per SQ entry
_KERNEL = int(SqeType.KERNEL)
LaunchKey = tuple[object, ...]
Held = list[object]  # a prepared launch's [sender, epoch it was made in, its shape]


def _signature(args: tuple[ParamValue, ...]) -> tuple[object, ...]:
    """What tells launches with equal but different arguments apart: each scalar's class, and a
    float's exact bits (0.0 == -0.0); tensors as they are (a 3-field TensorArg never equals a
    2-tuple)."""
    return tuple(
        arg if arg.__class__ is TensorArg else (arg.__class__, arg.hex() if isinstance(arg, float) else arg)
        for arg in args
    )


def launch_key(name: str, block_dim: int, args: tuple[ParamValue, ...], dumped: str | None = None) -> LaunchKey:
    """The key of a launch shape: the arguments themselves when all are tensors and no dump
    flags the launch (`dumped`: the op name it is dumped as), else their signature, since 1,
    1.0, True and 0.0, -0.0 are equal arguments but different parameter blocks."""
    if dumped is None and all(arg.__class__ is TensorArg for arg in args):
        return (name, block_dim, args)
    return (name, block_dim, _signature(args), dumped)


class Shape:
    """One kept launch shape: its kernel, its SQE around the task id, its parameter block."""

    __slots__ = ("generation", "kernel", "last_use", "param_va", "params", "prefix", "suffix")

    def __init__(
        self, kernel: Kernel, prefix: bytes, suffix: bytes, param_va: int, params: bytes, generation: int
    ) -> None:
        self.kernel = kernel
        self.prefix = prefix  # SQE bytes before the task id
        self.suffix = suffix  # SQE bytes after it
        self.param_va = param_va  # its slot in the argument area (0 without arguments)
        self.params = params  # written into the slot with the first send (then b"")
        self.last_use = -1  # position of the newest launch of this shape
        # of the kernel registry when the shape was checked; -1 once dropped (its slot may belong
        # to another shape by then): a sender sends only while it equals the registry's
        self.generation = generation


class Launcher:
    """Sends kernel launches on one stream: kept shapes, their senders, the argument area."""

    __slots__ = (
        "_area", "_clock", "_context", "_depth", "_epoch", "_generation", "_launch_ns", "_lock", "_retired",
        "_runtime", "_send_template", "_send_with_params", "_shapes", "_slots_made", "_stream",
        "_stream_id", "senders",
    )  # fmt: skip

    def __init__(self, stream: Stream, ring: SqRing, clock: HostClock, launch_ns: int, lock: SubmitLock) -> None:
        self._stream = stream  # whose tail (next position) launches take, under its submit lock
        self._context = stream.context
        self._runtime = stream.context.runtime
        self._stream_id = stream.stream_id
        self._send_with_params = ring.send_with_params
        self._send_template = ring.send_template
        self._clock = clock
        self._depth = stream.depth
        self._launch_ns = launch_ns
        self._lock = lock
        # (name, blockDim, tensors) -> send; cleared in place, never replaced (the API binds its get)
        self.senders: dict[LaunchKey, Callable[[], int]] = {}
        self._epoch = 0  # moves with every invalidate(): a sender made across one is not kept
        # every kept shape; those holding a slot in the order of their last launch
        self._shapes: OrderedDict[LaunchKey, Shape] = OrderedDict()
        self._generation = GENERATION[0]  # of the kernel registry when the shapes were made
        self._area = 0  # argument area base VA (allocated with the first shape with arguments)
        self._slots_made = 0
        self._retired: list[tuple[int, int]] = []  # (last use, slot VA) of slots no shape holds

    def launch(self, name: str, block_dim: int, args: tuple[ParamValue, ...], op_name: str | None = None) -> int:
        """Launch a kernel (aclrtLaunchKernel): nothing is enqueued on bad input; returns the
        task position. op_name names the launch in dumps (the graph's node name)."""
        send = None
        if block_dim.__class__ is int:
            senders = self.senders  # an all-tensor shape is kept under its arguments: no signature to make
            send = senders.get((name, block_dim, args)) or senders.get(launch_key(name, block_dim, args))
        position = send() if send is not None else self._launch_checked(name, block_dim, args, op_name)
        if op_name is not None and self._runtime.api_records is not None:  # profiling: the name joins its task
            self._note(position, op_name)
        return position

    def prepare(
        self, name: str, block_dim: int, args: tuple[ParamValue, ...], op_name: str | None = None
    ) -> Callable[[], int]:
        """A launch to repeat (what a model replays): each call launches as launch() would, and
        between the changes that drop senders (a kernel registered, the shape dropped, dumping
        switched, a sticky error, the stream destroyed) it is the kept shape's sender, with no
        checks and no lookup; after one, its next call goes through the checks again."""
        held: Held = [None, -1, None]  # the sender, the epoch it was made in, its shape
        runtime = self._runtime

        def launch() -> int:
            sender, epoch, shape = held
            if sender is None or epoch != self._epoch or shape.generation != GENERATION[0]:  # type: ignore[attr-defined]
                position = self._launch_checked(name, block_dim, args, op_name, held)  # and a new sender
            else:
                position = sender()  # type: ignore[operator]
            if op_name is not None and runtime.api_records is not None:
                self._note(position, op_name)
            return position

        return launch

    def _note(self, position: int, op_name: str) -> None:
        """Profiling: the op name joins its task."""
        records, device = self._runtime.api_records, self._context.device_id
        assert records is not None
        note_op_name(records, device, self._stream_id, position, self._clock.now_ns, op_name)

    def invalidate(self) -> None:
        """Drop the senders: later launches go through the checks (the stream's or the dump's
        state changed)."""
        self._epoch += 1
        self.senders.clear()

    def clear(self) -> None:
        """Forget every kept shape (and so its sender)."""
        with self._lock:
            for key in list(self._shapes):
                self._drop(key)

    def release(self) -> None:
        """Give the argument area back (the stream is destroyed)."""
        self.invalidate()
        self._shapes.clear()
        if self._area:
            self._context.free_internal(self._area)
            self._area = 0

    def _launch_checked(
        self,
        name: str,
        block_dim: int,
        args: tuple[ParamValue, ...],
        op_name: str | None,
        held: Held | None = None,
    ) -> int:
        """A launch through the checks (a shape seen before skips the kernel's); the shape's
        sender is kept for the API (all-tensor shapes, or keyed by signature) and in held."""
        epoch = self._epoch  # before the checks: an invalidate() after them voids their verdict
        if block_dim.__class__ is not int or not 1 <= block_dim <= MAX_BLOCK_DIM:  # True == 1.0 == 1
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"block_dim must be 1..{MAX_BLOCK_DIM}, got {block_dim!r}")
        self._stream.check_usable()
        if self._generation != GENERATION[0]:  # a kernel was registered or replaced
            self.clear()
            self._generation = GENERATION[0]
        dump = self._runtime.dump_config
        # while dumping, a launch's op name decides its flag: no sender (it is keyed without it)
        keep_sender = dump is None
        dumped = op_name or name
        if dump is not None and not dump.wants(dumped):
            dump = None
        key = launch_key(name, block_dim, args, dumped if dump else None)
        with self._lock:
            shape = self._shapes.get(key)
            if shape is not None and current_kernel(name) is not shape.kernel:
                shape = None  # replaced since: checked anew
            if shape is not None:
                position = self._send_locked(key, shape)
                if keep_sender and self._epoch == epoch:
                    self._keep_sender(key, shape, name, block_dim, args, held)
        if shape is None:
            kernel, pc, params = self._check(name, block_dim, args)
            with self._lock:
                shape = self._keep(key, kernel, pc, block_dim, params, dump is not None)
                position = self._send_locked(key, shape)
                if keep_sender and self._epoch == epoch:
                    self._keep_sender(key, shape, name, block_dim, args, held)
        if dump is not None:
            dump.op_names[(self._context.device_id, self._stream_id, position & 0xFFFF)] = dumped
        return position

    def _send_locked(self, key: LaunchKey, shape: Shape) -> int:
        clock = self._clock
        now = clock.now_ns = clock.now_ns + self._launch_ns
        if shape.params:
            position = self._stream.tail
            sqe = shape.prefix + TASK_ID_BYTES[position & 0xFFFF] + shape.suffix
            self._send_with_params(sqe, now, shape.param_va, shape.params)
            shape.params = b""  # written (a send that raised leaves it to write next time)
        else:
            position = self._send_template(shape.prefix, shape.suffix, now)  # the ring fills in the id
        shape.last_use = position
        self._shapes.move_to_end(key)
        return position

    def _keep_sender(
        self, key: LaunchKey, shape: Shape, name: str, block_dim: int, args: tuple[ParamValue, ...], held: Held | None
    ) -> None:
        """The shape's sender, for the API and in held (lock held)."""
        sender = self.senders.get(key)
        if sender is None:
            sender = self.senders[key] = self._sender(key, shape, name, block_dim, args)
        if held is not None:
            held[:] = sender, self._epoch, shape

    def _sender(
        self, key: LaunchKey, shape: Shape, name: str, block_dim: int, args: tuple[ParamValue, ...]
    ) -> Callable[[], int]:
        """_send_locked for one kept shape with everything bound (its parameters are written);
        a shape without a slot has no last use to track. Once a kernel was registered or
        replaced, or the shape dropped (its slot may be another's), it hands the launch back to
        the checks."""
        lock = self._lock  # its C calls bound: the cheapest way in and out
        take, give, waiters, wait_for_token, wake_waiter = (
            lock.take,
            lock.give,
            lock.waiters,
            lock.wait_for_token,
            lock.wake_waiter,
        )
        clock, send = self._clock, self._send_template
        prefix, suffix, param_va, launch_ns = shape.prefix, shape.suffix, shape.param_va, self._launch_ns
        used, checked = self._shapes.move_to_end, self._launch_checked

        def sender() -> int:
            try:
                take()
            except IndexError:  # another thread is submitting on this stream
                wait_for_token()
            try:
                if shape.generation == GENERATION[0]:
                    now = clock.now_ns = clock.now_ns + launch_ns
                    position = send(prefix, suffix, now)
                    if param_va:
                        shape.last_use = position
                        used(key)
                else:
                    position = -1
            finally:
                give(None)
                if waiters[0]:
                    wake_waiter()
            return position if position >= 0 else checked(name, block_dim, args, None)

        return sender

    def _check(self, name: str, block_dim: int, args: tuple[ParamValue, ...]) -> tuple[Kernel, int, bytes]:
        """A new shape's checks: the kernel (loaded on first use), its arguments."""
        kernel, pc = self._runtime.kernel(self._context.device_id, name)
        try:
            check_tensor_sizes(args)  # before the kernel's own check sees the shapes
            kernel.check(args)
            params = pack_params(args) if args else b""
        except (KernelArgumentError, DescriptorError) as exc:
            raise CannError(ErrorCode.RT_PARAM_INVALID, str(exc)) from None
        except Exception as exc:  # a user kernel's own check raised something else
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"{name}: its argument check raised {exc!r}") from None
        return kernel, pc, params

    def _keep(self, key: LaunchKey, kernel: Kernel, pc: int, block_dim: int, params: bytes, dump: bool) -> Shape:
        """Pack a checked shape's SQE around its slot and keep it (lock held)."""
        if key in self._shapes:
            self._drop(key)
        elif len(self._shapes) >= MAX_SHAPES_PER_DEPTH * self._depth:
            self._drop(next(iter(self._shapes)))
        param_va = self._slot() if params else 0
        sqe = KERNEL_SQE.pack(
            _KERNEL, DUMP if dump else 0, block_dim, self._stream_id, 0,
            0, 0, 1 if params else 0, kernel.core_kind, len(params), pc, param_va,
        )  # fmt: skip
        shape = self._shapes[key] = Shape(
            kernel, sqe[:TASK_ID_AT], sqe[TASK_ID_AT + 2 :], param_va, params, self._generation
        )
        return shape

    def _drop(self, key: LaunchKey) -> None:
        """Forget a kept shape (lock held); its slot is retired with its last use."""
        shape = self._shapes.pop(key)
        shape.generation = -1
        self.senders.pop(key, None)
        if shape.param_va:
            self._retired.append((shape.last_use, shape.param_va))

    def _slot(self) -> int:
        """An argument slot for a new shape: a new one while the area has room, else the one
        launched longest ago, retired or held by the least recently used shape (lock held)."""
        if self._slots_made < self._depth:
            if not self._area:
                self._area = self._context.allocate_internal(self._depth * MAX_PARAM_BYTES)
            self._slots_made += 1
            return self._area + (self._slots_made - 1) * MAX_PARAM_BYTES
        held = next((key for key, shape in self._shapes.items() if shape.param_va), None)
        oldest = min(self._retired) if self._retired else None
        if oldest is not None and (held is None or oldest[0] < self._shapes[held].last_use):
            self._retired.remove(oldest)
            return oldest[1]
        assert held is not None, "every slot is retired or held"
        self._drop(held)
        return self._retired.pop()[1]
