"""Kernel code on the device: registered kernel binaries placed at entry PCs (rtKernelLaunch's PC).

A kernel's binary is its Python implementation: the instruction at `entry + 4 * line` is line
`line` of the file the access happened in, so a fault's current PC maps back to a source line.
"""

from __future__ import annotations

from cannrt.kernels.registry import Kernel, get_kernel

CODE_BASE = 1 << 36  # kernel code window (below every data address space)
CODE_STRIDE = 0x100000  # room for the line table of a 262,144-line source file
INSTRUCTION_BYTES = 4


def pc_of_line(entry: int, line: int) -> int:
    """The PC of source line `line` in a kernel whose entry is `entry` (entry itself if unknown)."""
    return entry + INSTRUCTION_BYTES * line if 0 < line < CODE_STRIDE // INSTRUCTION_BYTES else entry


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

    def line_of(self, pc: int) -> tuple[Kernel, int] | None:
        """(kernel, source line) of any PC inside a kernel's code window; line 0 is the entry."""
        entry = CODE_BASE + (pc - CODE_BASE) // CODE_STRIDE * CODE_STRIDE
        kernel = self._by_pc.get(entry)
        return None if kernel is None else (kernel, (pc - entry) // INSTRUCTION_BYTES)
