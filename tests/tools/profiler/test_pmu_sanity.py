"""PMU sanity on real records: what bounds a kernel, and the L2 hit rate, as the device modelled them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

import cannrt
from cannrt.abi import TaskRecord
from cannrt.api.profile import profile
from cannrt.config import ChipSpec
from cannrt.runtime.core import Runtime
from cannrt.tools.profiler import GROUPS, group_values, metrics
from cannrt.tools.profiler.stats import bound_of

MIB = 1 << 20


def kernels(records: list[TaskRecord], name: str) -> list[TaskRecord]:
    return [r for r in records if r.name == name]


def test_a_large_matmul_is_cube_bound(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x, w = device.empty((2048, 2048), np.float16), device.empty((2048, 2048), np.float16)
    y = device.empty((2048, 2048), np.float32)
    with profile() as prof:
        stream.launch("matmul", x, w, y, block_dim=24)
        stream.synchronize()
    (record,) = kernels(prof.records, "matmul")
    ratios = metrics.pipe_ratios(record, rt.settings.chip)
    assert bound_of(ratios) == "cube"
    assert ratios["mac"] > 0.8 and ratios["mac"] > ratios["mte2"] and ratios["mac"] > ratios["vec"]
    assert metrics.memory_bound(record, rt.settings.chip) < 1
    (row,) = [k for k in prof_table_rows(prof) if k[0] == "matmul"]
    assert row[-1] == "cube"


def prof_table_rows(prof: object) -> list[list[str]]:
    table = prof.table()  # type: ignore[attr-defined]
    cells = [list(column.cells) for column in table.columns]
    return [list(row) for row in zip(*cells, strict=True)]


@pytest.fixture
def small_l2(make_runtime: Callable[..., Runtime]) -> Runtime:
    """A chip whose L2 holds 2 MiB, so a 4 MiB tensor does not fit."""
    return make_runtime(chip=dataclasses.replace(ChipSpec(), l2_bytes=2 * MIB))


def test_an_add_over_a_tensor_larger_than_l2_is_memory_bound_and_misses(small_l2: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    n = 4 * MIB // 4
    a, b, c = (device.empty((n,), np.float32) for _ in range(3))
    with profile() as prof:
        stream.launch("add", a, b, c, block_dim=48)
        stream.launch("add", a, b, c, block_dim=48)
        stream.synchronize()
    chip = small_l2.settings.chip
    for record in kernels(prof.records, "add"):
        ratios = metrics.pipe_ratios(record, chip)
        assert bound_of(ratios) == "memory"
        assert metrics.l2_hit_rate(record) < 0.05
    (row,) = prof_table_rows(prof)
    assert row[-1] == "memory" and float(row[-2]) < 0.05


def test_the_same_add_on_a_tensor_that_fits_l2_hits_the_second_time(small_l2: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    n = 64 * 1024 // 4
    a, b, c = (device.empty((n,), np.float32) for _ in range(3))
    with profile() as prof:
        stream.launch("add", a, b, c, block_dim=8)
        stream.launch("add", a, b, c, block_dim=8)
        stream.synchronize()
    first, second = kernels(prof.records, "add")

    def read_hit_rate(record: TaskRecord) -> float:
        counts = metrics.l2_requests(record)
        return counts["read_cache_hit"] / (counts["read_cache_hit"] + counts["read_cache_miss_allocate"])

    assert read_hit_rate(second) > 0.99 and second.l2_hit > 0.99  # every input line is resident
    assert metrics.l2_hit_rate(second) > metrics.l2_hit_rate(first)
    # the writes to c are not in place, so they count as misses (docs/profiling.md: write hits)
    assert metrics.l2_hit_rate(second) == pytest.approx(2 / 3, abs=0.01)


def test_every_ratio_and_rate_of_every_group_lies_in_zero_one(small_l2: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x = device.array(np.ones((256, 256), np.float16))
    y = device.empty((256, 256), np.float32)
    big = device.empty((MIB,), np.float32)
    with profile() as prof:
        stream.launch("matmul", x, x, y, block_dim=8)
        stream.launch("gelu", y, y, block_dim=16)
        stream.launch("relu", big, big, block_dim=48)
        stream.launch("softmax", y, y, block_dim=4)
        stream.launch("spin", 1000, block_dim=2)
        stream.synchronize()
    chip = small_l2.settings.chip
    checked = 0
    for record in prof.records:
        if record.pipes is None:
            continue
        for group in GROUPS:
            for key, value in group_values(group, record, chip).items():
                if key.endswith(("ratio", "rate")):
                    assert 0.0 <= value <= 1.0, (record.name, group, key, value)
                    checked += 1
        assert 0.0 <= metrics.l2_hit_rate(record) <= 1.0
    assert checked > 0
