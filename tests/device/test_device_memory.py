"""HBM page accounting and the MMU: every device access is checked, faults say exactly what went wrong."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cannrt.device.fabric import Fabric
from cannrt.device.memory import (
    HUGE_PAGE,
    NORMAL_PAGE,
    VA_SPACE_SHIFT,
    AddressSpace,
    DeviceFault,
    Hbm,
    OutOfDeviceMemory,
)

MIB = 1 << 20


def _space_with(hbm: Hbm, asid: int = 0, device_id: int = 0, valid: int = 100) -> tuple[AddressSpace, int]:
    """An address space with one normal-page allocation of `valid` bytes at the window base."""
    space = AddressSpace(asid, device_id)
    chunk = hbm.allocate(valid, NORMAL_PAGE)
    space.map(space.base, chunk, 0, chunk.size, valid)
    return space, space.base


# -- HBM -----------------------------------------------------------------------------------------
def test_physical_allocations_are_rounded_to_their_page_size() -> None:
    hbm = Hbm(64 * MIB)
    normal = hbm.allocate(100, NORMAL_PAGE)
    huge = hbm.allocate(3 * MIB, HUGE_PAGE)
    assert (normal.size, huge.size) == (4096, 4 * MIB)
    assert (hbm.used_normal, hbm.used_huge, hbm.used) == (4096, 4 * MIB, 4 * MIB + 4096)


def test_hbm_refuses_what_does_not_fit_and_says_the_numbers() -> None:
    hbm = Hbm(8 * MIB)
    hbm.allocate(6 * MIB, HUGE_PAGE)
    with pytest.raises(OutOfDeviceMemory) as info:
        hbm.allocate(3 * MIB, HUGE_PAGE)
    assert (info.value.requested, info.value.free, info.value.total) == (4 * MIB, 2 * MIB, 8 * MIB)
    assert str(info.value) == f"requested {4 * MIB} bytes, {2 * MIB} free of {8 * MIB}"


def test_freeing_returns_pages_and_unknown_handles_are_refused() -> None:
    hbm = Hbm(8 * MIB)
    chunk = hbm.allocate(8 * MIB, HUGE_PAGE)
    hbm.free(chunk.handle)
    assert hbm.used == 0
    assert hbm.allocate(8 * MIB, HUGE_PAGE).size == 8 * MIB
    with pytest.raises(KeyError):
        hbm.free(chunk.handle)


def test_physical_memory_is_backed_only_when_first_touched_and_then_reads_zero() -> None:
    hbm = Hbm(1 << 40)  # 1 TiB of HBM on any host
    chunk = hbm.allocate(1 << 30, HUGE_PAGE)
    assert chunk._array is None
    view = chunk.array()
    assert view.nbytes == 1 << 30
    assert int(view[12345]) == 0 and int(view[-1]) == 0


# -- MMU -----------------------------------------------------------------------------------------
def test_each_address_space_owns_its_own_window_of_the_48_bit_va() -> None:
    spaces = [AddressSpace(asid, 0) for asid in range(3)]
    for first, second in itertools.pairwise(spaces):
        assert first.limit == second.base
        assert first.limit - first.base == 1 << VA_SPACE_SHIFT
    assert spaces[0].base > 0  # low addresses (null and friends) are never valid
    assert spaces[-1].limit <= 1 << 48


def test_accesses_inside_an_allocation_see_its_bytes() -> None:
    hbm = Hbm(64 * MIB)
    space, va = _space_with(hbm)
    space.view(va, 100, "write")[:] = np.arange(100, dtype=np.uint8)
    assert space.view(va + 10, 3, "read").tolist() == [10, 11, 12]


def test_reading_just_past_an_allocation_is_a_fault_with_the_distance_and_the_allocation() -> None:
    hbm = Hbm(64 * MIB)
    space, va = _space_with(hbm, valid=100)
    with pytest.raises(DeviceFault) as info:
        space.segments(va + 120, 4, "read")
    fault = info.value
    assert (fault.kind, fault.address, fault.nbytes, fault.asid) == ("read", va + 120, 4, 0)
    assert fault.nearest is not None and fault.nearest.va == va
    assert str(fault) == (
        f"invalid read of 4 bytes at 0x{va + 120:x}: is 20 bytes after the nearest allocation at 0x{va:x} of size 100"
    )


def test_the_page_padding_behind_an_allocation_is_not_accessible() -> None:
    hbm = Hbm(64 * MIB)
    space, va = _space_with(hbm, valid=100)  # mapped 4096 bytes, 100 valid
    with pytest.raises(DeviceFault, match="is 0 bytes after"):
        space.segments(va + 100, 1, "write")


def test_an_access_that_overruns_the_end_reports_by_how_much() -> None:
    hbm = Hbm(64 * MIB)
    space, va = _space_with(hbm, valid=100)
    with pytest.raises(DeviceFault) as info:
        space.segments(va + 96, 8, "write")
    assert str(info.value) == (
        f"invalid write of 8 bytes at 0x{va + 96:x}: overruns by 4 bytes the nearest allocation at 0x{va:x} of size 100"
    )


def test_an_access_before_the_first_allocation_reports_the_gap() -> None:
    hbm = Hbm(64 * MIB)
    space = AddressSpace(0, 0)
    chunk = hbm.allocate(64, NORMAL_PAGE)
    va = space.base + 0x10000
    space.map(va, chunk, 0, chunk.size, 64)
    with pytest.raises(DeviceFault, match=f"is 16 bytes before the nearest allocation at 0x{va:x} of size 64"):
        space.segments(va - 16, 4, "read")


def test_an_empty_address_space_faults_everywhere() -> None:
    space = AddressSpace(0, 0)
    with pytest.raises(DeviceFault, match="no allocation in this address space"):
        space.segments(space.base, 1, "read")


def test_an_access_spanning_two_adjacent_mappings_is_served_in_pieces() -> None:
    hbm = Hbm(64 * MIB)
    space = AddressSpace(0, 0)
    first, second = hbm.allocate(4096, NORMAL_PAGE), hbm.allocate(4096, NORMAL_PAGE)
    space.map(space.base, first, 0, 4096, 4096)
    space.map(space.base + 4096, second, 0, 4096, 4096)
    parts = space.segments(space.base + 4000, 200, "read")
    assert [p.size for p in parts] == [96, 104]
    with pytest.raises(DeviceFault):
        space.view(space.base + 4000, 200, "read")  # one contiguous view is impossible


def test_overlapping_mappings_are_refused_and_unmap_needs_a_mapping_start() -> None:
    hbm = Hbm(64 * MIB)
    space, va = _space_with(hbm)
    other = hbm.allocate(4096, NORMAL_PAGE)
    with pytest.raises(ValueError, match="already mapped"):
        space.map(va + 8, other, 0, 4096, 4096)
    with pytest.raises(KeyError):
        space.unmap(va + 8)
    space.unmap(va)
    with pytest.raises(DeviceFault):
        space.segments(va, 1, "read")


def test_another_contexts_memory_on_the_same_device_is_a_fault_naming_its_owner() -> None:
    hbm = Hbm(64 * MIB)
    fabric = Fabric()
    mine, _ = _space_with(hbm, asid=0)
    theirs, their_va = _space_with(hbm, asid=1)
    fabric.add(mine)
    fabric.add(theirs)
    with pytest.raises(DeviceFault) as info:
        fabric.resolve(their_va, 0, 0, "read", 4)
    assert (info.value.asid, info.value.owner_asid) == (0, 1)
    assert str(info.value) == (f"invalid read of 4 bytes at 0x{their_va:x}: address belongs to address space 1, not 0")


def test_a_peer_devices_memory_is_reached_through_its_own_address_space() -> None:
    hbm0, hbm1 = Hbm(64 * MIB), Hbm(64 * MIB)
    fabric = Fabric()
    mine, _ = _space_with(hbm0, asid=0, device_id=0)
    peer, peer_va = _space_with(hbm1, asid=1, device_id=1)
    fabric.add(mine)
    fabric.add(peer)
    assert fabric.resolve(peer_va, 0, 0, "read", 4) is peer
    assert fabric.resolve(mine.base, 0, 0, "read", 4) is mine
