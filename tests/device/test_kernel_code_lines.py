"""A fault's current PC maps back to the kernel source line it was made from."""

from __future__ import annotations

from cannrt.device.code import CODE_STRIDE, KernelCode, pc_of_line
from cannrt.kernels.registry import get_kernel


def test_a_pc_inside_a_kernel_maps_back_to_its_kernel_and_line() -> None:
    code = KernelCode()
    relu, gelu = code.load("relu"), code.load("gelu")
    assert gelu - relu == CODE_STRIDE
    assert code.line_of(pc_of_line(relu, 99)) == (get_kernel("relu"), 99)
    assert code.line_of(pc_of_line(gelu, 7)) == (get_kernel("gelu"), 7)
    assert code.line_of(relu) == (get_kernel("relu"), 0)  # the entry
    assert code.line_of(gelu + CODE_STRIDE) is None  # no kernel placed there


def test_an_unknown_line_leaves_the_pc_at_the_entry() -> None:
    assert pc_of_line(0x1000, 0) == 0x1000
    assert pc_of_line(0x1000, CODE_STRIDE) == 0x1000  # beyond the line table
