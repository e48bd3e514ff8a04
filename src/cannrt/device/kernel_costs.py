"""Costs of kernel launches on the modelled cores: work, block split, per-block nanoseconds."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from cannrt.abi import PipeTimes, TensorArg, Work, tensor_nbytes
from cannrt.config import ChipSpec
from cannrt.device.l2 import L2Model
from cannrt.kernels.cost import block_cost
from cannrt.kernels.registry import Kernel

if TYPE_CHECKING:
    from cannrt.device.task import Task

CACHE_LIMIT = 4096  # entries per cache before it starts over
Aux = tuple[PipeTimes | None, float, Work | None]
"""What a kernel task keeps of its costing: summed pipe times, L2 hit rate, work."""


class KernelPlan(NamedTuple):
    """What the scheduler needs of one launch shape: work, per-block fractions, touched ranges."""

    work: Work
    fractions: tuple[float, ...]
    reads: list[tuple[int, int]]
    writes: list[tuple[int, int]]


class KernelCosts:
    """Per-launch costs, cached by launch shape (kernel, arguments, blockDim)."""

    def __init__(self, chip: ChipSpec, l2: L2Model) -> None:
        self.chip = chip
        self.l2 = l2
        self._plans: dict[tuple[object, ...], KernelPlan] = {}
        # (id(plan), L2 hit rate, active cores) -> (ns of each block, summed pipe times)
        self._cost_cache: dict[tuple[int, float, int], tuple[tuple[int, ...], PipeTimes]] = {}
        # launches that touch no memory (costs independent of the L2): shape -> costs
        self.memoryless: dict[tuple[object, ...], tuple[tuple[int, ...], Aux]] = {}

    def of(self, task: Task, kernel: Kernel, key: tuple[object, ...], cores: int) -> tuple[tuple[int, ...], Aux]:
        """Nanoseconds of each block, and (summed pipe times, L2 hit rate, work), of one launch
        on `cores` cores of its kind (accesses the L2 model when the launch touches memory).
        `key` is (kernel name, arguments, blockDim)."""
        plan = self._plans.get(key) or self._plan(task, kernel, key)
        touches = bool(plan.reads or plan.writes)
        hit = self.l2.access(plan.reads, plan.writes) if touches else 0.0
        active = min(len(plan.fractions), cores)
        cost_key = (id(plan), hit, active)
        cached = self._cost_cache.get(cost_key)
        if cached is None:
            costs = {f: block_cost(plan.work, f, self.chip, active, hit) for f in set(plan.fractions)}
            sums = PipeTimes(*(sum(costs[f][i] for f in plan.fractions) for i in range(6)))
            if len(self._cost_cache) > CACHE_LIMIT:
                self._cost_cache.clear()
            block_ns = tuple(int(costs[f].total_ns) for f in plan.fractions)
            cached = self._cost_cache[cost_key] = (block_ns, sums)
        aux = (cached[1], hit, plan.work)
        if not touches:
            self.memoryless[key] = (cached[0], aux)
        return cached[0], aux

    def _plan(self, task: Task, kernel: Kernel, key: tuple[object, ...]) -> KernelPlan:
        """Work, block split and touched ranges of a launch shape not seen yet."""
        work = kernel.work(task.args)
        reads: list[tuple[int, int]] = []
        writes: list[tuple[int, int]] = []
        for index, arg in enumerate(task.args):
            if isinstance(arg, TensorArg):
                (writes if index in kernel.outputs else reads).append((arg.address, tensor_nbytes(arg)))
        block_dim: int = key[2]  # type: ignore[assignment]
        plan = KernelPlan(work, tuple(kernel.block_fractions(work, block_dim)), reads, writes)
        if len(self._plans) > CACHE_LIMIT:
            self._plans.clear()
            self._cost_cache.clear()  # keyed by id(plan): ids of dropped plans may be reused
            self.memoryless.clear()
        self._plans[key] = plan
        return plan
