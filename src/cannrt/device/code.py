"""Kernel code on the device: registered kernel binaries placed at entry PCs (rtKernelLaunch's PC)."""

from __future__ import annotations

from cannrt.kernels.registry import Kernel, get_kernel

CODE_BASE = 1 << 36  # kernel code window (below every data address space)
CODE_STRIDE = 0x1000


class KernelCode:
    """Which kernel binary sits at which PC; a replaced kernel gets a new PC."""

    def __init__(self) -> None:
        self._by_pc: dict[int, Kernel] = {}
        self._pcs: dict[str, int] = {}

    def load(self, name: str) -> int:
        """Place a registered kernel's code in device memory; returns its entry PC (KeyError if
        no kernel of that name is registered)."""
        kernel = get_kernel(name)
        pc = self._pcs.get(name)
        if pc is None or self._by_pc[pc] is not kernel:  # new, or replaced: a new binary
            pc = CODE_BASE + CODE_STRIDE * (len(self._by_pc) + 1)
            self._pcs[name] = pc
            self._by_pc[pc] = kernel
        return pc

    def at(self, pc: int) -> Kernel | None:
        """The kernel whose entry is pc, if any."""
        return self._by_pc.get(pc)
