"""The cost model stays calibrated against published 910B measurements (REFERENCE.md section 13)."""

from __future__ import annotations

import pytest

from cannrt.abi import TensorArg
from cannrt.config import ChipSpec
from cannrt.kernels import get_kernel
from cannrt.kernels.calibration import ANCHORS, model_us
from cannrt.kernels.cost import block_cost

LARGE = [a for a in ANCHORS if a.measured_us >= 60]


@pytest.mark.parametrize("anchor", LARGE, ids=[a.label for a in LARGE])
def test_large_kernels_are_within_fifteen_percent_of_measured(anchor) -> None:
    modelled = model_us(anchor)
    assert abs(modelled - anchor.measured_us) / anchor.measured_us < 0.15


def test_small_matmul_is_never_faster_than_the_device_floor() -> None:
    small = TensorArg(0, 1, (16, 16))
    kernel = get_kernel("matmul")
    work = kernel.work([small, small, small])
    assert block_cost(work, 1.0, ChipSpec(), 1, 0.0).total_ns < 1200  # so the 1.2 us floor applies


def test_fp32_matmul_runs_at_a_quarter_of_fp16_cube_rate() -> None:
    fp16 = next(a for a in ANCHORS if a.label == "matmul fp16 4096^3")
    fp32 = next(a for a in ANCHORS if a.label == "matmul fp32 4096^3")
    assert model_us(fp32) / model_us(fp16) == pytest.approx(4.0, rel=0.02)


def test_l2_hits_make_a_memory_bound_kernel_faster() -> None:
    n = 1 << 20
    kernel = get_kernel("add")
    work = kernel.work([TensorArg(0, 0, (n,))] * 3)
    cold = block_cost(work, 1 / 48, ChipSpec(), 48, 0.0).total_ns
    warm = block_cost(work, 1 / 48, ChipSpec(), 48, 1.0).total_ns
    assert warm < cold


def test_910b4_preset_is_slower_than_910b1_on_compute() -> None:
    anchor = next(a for a in ANCHORS if a.label == "matmul fp16 4096^3")
    assert model_us(anchor, ChipSpec(name="x", aicore_count=20, clock_mhz=1650.0)) > model_us(anchor)
