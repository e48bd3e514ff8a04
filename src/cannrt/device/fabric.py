"""The interconnect: which address space (and so which device) owns an address."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cannrt.abi import CopyKind
from cannrt.device.memory import VA_SPACE_BASE, VA_SPACE_SHIFT, AddressSpace, DeviceFault

if TYPE_CHECKING:
    from cannrt.config import ChipSpec


class Fabric:
    """All address spaces of the simulated machine, keyed by address space id."""

    def __init__(self) -> None:
        self._spaces: dict[int, AddressSpace] = {}
        # the address space with this id (KeyError if none): the dict's own lookup, no Python call
        self.space: Callable[[int], AddressSpace] = self._spaces.__getitem__

    def add(self, space: AddressSpace) -> None:
        """Register a new address space."""
        self._spaces[space.asid] = space

    def remove(self, asid: int) -> None:
        """Forget an address space (its context was destroyed)."""
        self._spaces.pop(asid, None)

    @staticmethod
    def asid_of(address: int) -> int:
        """The address space whose VA window holds address (may not exist)."""
        return (address >> VA_SPACE_SHIFT) - VA_SPACE_BASE

    def owner(self, address: int) -> AddressSpace | None:
        """The address space owning address, if any."""
        return self._spaces.get(self.asid_of(address))

    def copy_bandwidth(self, chip: ChipSpec, memset: bool, kind: int, src: int, dst: int) -> float:
        """GB/s of an SDMA copy or memset: HBM for a memset, PCIe across the host boundary, the
        peer link between devices, half of HBM within one device (read and write share it)."""
        if memset:
            return chip.hbm_bandwidth_gbps
        if CopyKind(kind).crosses_pcie:
            return chip.pcie_bandwidth_gbps
        source, target = self.owner(src), self.owner(dst)
        if source is not None and target is not None and source.device_id != target.device_id:
            return chip.peer_bandwidth_gbps
        return chip.hbm_bandwidth_gbps / 2

    def resolve(self, address: int, asid: int, device_id: int, kind: str, nbytes: int) -> AddressSpace:
        """The space an engine of (device, asid) reaches address through: its own, or a peer device's.

        Another context's memory on the same device is isolated: a DeviceFault.
        """
        own = self._spaces[asid]
        owner = self.owner(address)
        if owner is None or owner is own:
            return own
        if owner.device_id != device_id:
            return owner
        raise DeviceFault(kind, address, nbytes, None, asid, owner.asid)
