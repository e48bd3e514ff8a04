"""Stateful property test of device memory: random malloc / free, caching-pool and stream-ordered
arrays, VMM reserve / map / unmap / release, queued copies and kernels, and misuse.

After every step: no two live allocations overlap, every address is aligned as documented, the
caching pool's stats equal a recount of its blocks, data written by queued copies reads back; every
misuse gets its documented code; after reset_device all HBM is free."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import cannrt
from cannrt.abi import CopyKind
from cannrt.api import pools
from cannrt.config import ChipSpec, Settings
from cannrt.runtime import memory_ops as mo
from cannrt.runtime import stream_pools

MIB = 1 << 20
H2D = CopyKind.HOST_TO_DEVICE


class DeviceMemory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runtime = cannrt.reset_runtime(Settings(chip=ChipSpec(hbm_bytes=512 * MIB), watchdog_s=10.0))
        self.device = cannrt.Device(0)
        self.ctx = self.device.context
        self.baseline = self.device.mem_info()[0]  # HBM free before this test's streams and memory
        self.streams = [self.device.stream(), self.device.stream()]
        self.mallocs: dict[int, int] = {}  # va -> bytes taken (padded)
        self.arrays: list[tuple[cannrt.DeviceArray, cannrt.Stream]] = []  # pool arrays and their streams
        self.reserved: dict[int, int] = {}  # va -> size
        self.handles: set[int] = set()  # physical handles
        self.mapped: list[tuple[int, int]] = []  # (va, handle) of each mapping
        self.expected: dict[int, np.ndarray] = {}  # address -> bytes a queued copy wrote there
        self.fill = itertools.count(1)

    # -- allocation --------------------------------------------------------------------------
    @rule(size=st.integers(1, 3 * MIB), policy=st.sampled_from([0, 1, 2]))
    def malloc(self, size: int, policy: int) -> None:
        va = mo.malloc(self.ctx, size, policy)
        assert va % 64 == 0
        self.mallocs[va] = -(-(size + 32) // 32) * 32

    @precondition(lambda self: self.mallocs)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        va = data.draw(st.sampled_from(sorted(self.mallocs)))
        mo.free(self.ctx, va)
        del self.mallocs[va]
        self.expected.pop(va, None)
        try:
            mo.free(self.ctx, va)
        except cannrt.CannError as exc:  # a double free: documented 107000
            assert exc.code == 107000
        else:
            raise AssertionError("a double free was accepted")

    @rule(count=st.integers(1, 300_000), which=st.integers(0, 1), ordered=st.booleans())
    def array(self, count: int, which: int, ordered: bool) -> None:
        stream = self.streams[which]
        if ordered:
            array = stream.malloc_async(count, np.float32)
        else:
            with stream:
                array = self.device.empty(count, np.float32)
        assert array.address % 512 == 0
        self.arrays.append((array, stream))

    @precondition(lambda self: self.arrays)
    @rule(data=st.data())
    def free_array(self, data: st.DataObject) -> None:
        array, _ = self.arrays.pop(data.draw(st.integers(0, len(self.arrays) - 1)))
        array.free()
        self.expected.pop(array.address, None)

    # -- queued work -------------------------------------------------------------------------
    @precondition(lambda self: self.arrays or self.mallocs)
    @rule(data=st.data(), which=st.integers(0, 1))
    def queued_copy(self, data: st.DataObject, which: int) -> None:
        targets = [(a.address, a.nbytes) for a, _ in self.arrays] + [(va, 64) for va in self.mallocs]
        address, nbytes = data.draw(st.sampled_from(targets))
        nbytes = min(nbytes, 4096)
        pattern = np.full(nbytes, next(self.fill) % 251, np.uint8)
        stream = self.streams[which]._rt
        stream.launcher.launch("spin", 1, (20_000,))
        mo.memcpy_async(self.ctx, address, nbytes, pattern.ctypes.data, nbytes, H2D, stream)
        self.expected[address] = pattern
        self._sync()  # the pattern must stay alive until the copy ran

    @precondition(lambda self: self.arrays)
    @rule(data=st.data())
    def queued_kernel(self, data: st.DataObject) -> None:
        array, stream = data.draw(st.sampled_from(self.arrays))
        stream.launch("spin", 20_000)
        stream.launch("relu", array, array, block_dim=4)  # on the array's own stream
        self.expected.pop(array.address, None)  # relu of arbitrary bytes changes them

    def _sync(self) -> None:
        for stream in self.streams:
            stream.synchronize()

    # -- virtual memory ----------------------------------------------------------------------
    @rule(granules=st.integers(1, 4))
    def reserve(self, granules: int) -> None:
        va = mo.reserve_address(self.ctx, granules * 2 * MIB)
        assert va % (2 * MIB) == 0
        self.reserved[va] = granules * 2 * MIB

    @rule()
    def physical(self) -> None:
        self.handles.add(mo.malloc_physical(self.ctx, 2 * MIB))

    @precondition(lambda self: self.reserved and self.handles)
    @rule(data=st.data())
    def map(self, data: st.DataObject) -> None:
        va = data.draw(st.sampled_from(sorted(self.reserved)))
        offset = data.draw(st.integers(-1, self.reserved[va] // (2 * MIB))) * 2 * MIB
        handle = data.draw(st.sampled_from(sorted(self.handles)))
        target = va + offset
        inside = any(start <= target and target + 2 * MIB <= start + n for start, n in self.reserved.items())
        taken = any(t == target for t, _ in self.mapped)
        try:
            mo.map_memory(self.ctx, target, 2 * MIB, 0, handle)
        except cannrt.CannError as exc:
            assert exc.code == 107000 and (not inside or taken)
        else:
            assert inside and not taken  # one handle may back several mappings
            self.mapped.append((target, handle))

    @precondition(lambda self: self.mapped)
    @rule(data=st.data())
    def unmap(self, data: st.DataObject) -> None:
        target, _ = self.mapped.pop(data.draw(st.integers(0, len(self.mapped) - 1)))
        mo.unmap_memory(self.ctx, target)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def free_physical(self, data: st.DataObject) -> None:
        handle = data.draw(st.sampled_from(sorted(self.handles)))
        mapped = any(h == handle for _, h in self.mapped)
        try:
            mo.free_physical(self.ctx, handle)
        except cannrt.CannError as exc:
            assert exc.code == 107000 and mapped
        else:
            assert not mapped
            self.handles.discard(handle)

    @precondition(lambda self: self.reserved)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        va = data.draw(st.sampled_from(sorted(self.reserved)))
        mapped = any(va <= t < va + self.reserved[va] for t, _ in self.mapped)
        try:
            mo.release_address(self.ctx, va)
        except cannrt.CannError as exc:
            assert exc.code == 107000 and mapped
        else:
            assert not mapped
            del self.reserved[va]

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def nothing_overlaps(self) -> None:
        spans = sorted(
            [(va, va + n) for va, n in self.mallocs.items()]
            + [(a.address, a.address + max(a.nbytes, 1)) for a, _ in self.arrays]
            + [(va, va + n) for va, n in self.reserved.items()]
        )
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))

    @invariant()
    def stats_equal_a_recount(self) -> None:
        pool = pools.pool_of(self.ctx)
        stats = pool.memory_stats()
        assert all(stats[key] == value for key, value in pool.recount().items())
        live = [a.block for a, _ in self.arrays if a.block is not None]
        assert stats["allocation.all.current"] == len(live)
        assert stats["allocated_bytes.all.current"] == sum(block.size for block in live)

    @invariant()
    def copies_landed(self) -> None:
        for address, pattern in self.expected.items():
            back = np.zeros_like(pattern)
            mo.memcpy(self.ctx, back.ctypes.data, back.nbytes, address, back.nbytes, CopyKind.DEVICE_TO_HOST)
            assert np.array_equal(back, pattern)

    def teardown(self) -> None:
        """Give everything back through the API: HBM is as free as at the start; then reset."""
        for va in list(self.mallocs):
            mo.free(self.ctx, va)
        for array, _ in self.arrays:
            array.free()
        for target, _ in self.mapped:
            mo.unmap_memory(self.ctx, target)
        for handle in self.handles:
            mo.free_physical(self.ctx, handle)
        for va in self.reserved:
            mo.release_address(self.ctx, va)
        self._sync()
        self.device.empty_cache()
        self.streams[0].malloc_async(16).free()  # the default stream-ordered pool exists from here
        self._sync()
        cannrt.memory.summary(self.device, file=None)
        stream_pools.trim_to(self.ctx, stream_pools.default_pool(self.ctx), 0)
        for stream in self.streams:
            stream.destroy()  # with their argument areas
        assert self.device.mem_info()[0] == self.baseline
        self.runtime.reset_device(0)
        context = self.runtime.set_device(0)
        assert mo.mem_info(context, mo.MemAttr.HBM_MEM) == (512 * MIB, 512 * MIB)
        self.runtime.close()


DeviceMemory.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
TestDeviceMemory = DeviceMemory.TestCase
