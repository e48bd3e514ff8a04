"""Costs of kernel launches on the modelled cores: work, block split, per-block nanoseconds."""

from __future__ import annotations

from typing import Any, NamedTuple

from cannrt.abi import ParamValue, PipeTimes, TensorArg, Work, tensor_nbytes
from cannrt.config import ChipSpec
from cannrt.device.l2 import L2Model, granules
from cannrt.kernels.cost import block_cost
from cannrt.kernels.registry import Kernel

CACHE_LIMIT = 4096  # entries per cache before it starts over
Aux = tuple[PipeTimes | None, float, Work | None]
"""What a kernel task keeps of its costing: summed pipe times, L2 hit rate, work."""
Costed = tuple[tuple[int, ...], Aux]
"""Nanoseconds of each block, and the Aux."""


class KernelPlan(NamedTuple):
    """What the scheduler needs of one launch shape: work, per-block fractions, touched granules."""

    work: Work
    fractions: tuple[float, ...]
    read_granules: tuple[int, ...]  # L2 granules the launch reads, then those it writes
    write_granules: tuple[int, ...]


class KernelCosts:
    """Per-launch costs, cached by launch shape (kernel, arguments, blockDim)."""

    def __init__(self, chip: ChipSpec, l2: L2Model) -> None:
        self.chip = chip
        self.l2 = l2
        self._plans: dict[tuple[object, ...], tuple[Kernel, KernelPlan]] = {}  # by name: check the kernel
        # id(arguments) -> [arguments, kernel, blockDim, plan, touched granules, then the last hit
        # rate, cores and costing]: the same decoded argument tuple comes back for every launch of
        # a shape, so most lookups need no hashing of it
        self._recent: dict[int, list[Any]] = {}
        # (id(plan), L2 hit rate, active cores) -> (ns of each block, (summed pipe times, hit, work))
        self._cost_cache: dict[tuple[int, float, int], Costed] = {}

    def of(self, kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int, cores: int) -> Costed:
        """Nanoseconds of each block, and (summed pipe times, L2 hit rate, work), of one launch
        on `cores` cores of its kind (accesses the L2 model when the launch touches memory)."""
        recent = self._recent.get(id(args))
        if recent is None or recent[0] is not args or recent[1] is not kernel or recent[2] != block_dim:
            recent = self._recent_of(kernel, args, block_dim)
        touched = recent[4]
        hit = 0.0 if touched is None else self.l2.access(touched)
        if recent[5] == hit and recent[6] == cores:  # as the launch before: its costing
            return recent[7]  # type: ignore[no-any-return]
        plan: KernelPlan = recent[3]
        active = len(plan.fractions)
        if cores < active:
            active = cores
        cost_key = (id(plan), hit, active)
        cached = self._cost_cache.get(cost_key)
        if cached is None:
            cached = self._cost_cache[cost_key] = self._cost(plan, hit, active)
        recent[5:] = hit, cores, cached
        return cached

    def _cost(self, plan: KernelPlan, hit: float, active: int) -> Costed:
        """The costing of a plan at one L2 hit rate on `active` cores (made once per triple)."""
        costs = {f: block_cost(plan.work, f, self.chip, active, hit) for f in set(plan.fractions)}
        sums = PipeTimes(*(sum(costs[f][i] for f in plan.fractions) for i in range(6)))
        if len(self._cost_cache) > CACHE_LIMIT:
            self._cost_cache.clear()
        block_ns = tuple(int(costs[f].total_ns) for f in plan.fractions)
        return block_ns, (sums, hit, plan.work)

    def _recent_of(self, kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int) -> list[Any]:
        """The entry of an argument tuple not seen lately: [args, kernel, blockDim, plan, its
        (read, written) granules or None if none, then the L2 hit rate, cores and costing of its
        last launch]."""
        if len(self._recent) > CACHE_LIMIT:
            self._recent.clear()
        plan = self._plan_of(kernel, args, block_dim)
        touched = (plan.read_granules, plan.write_granules) if plan.read_granules or plan.write_granules else None
        entry = self._recent[id(args)] = [args, kernel, block_dim, plan, touched, -1.0, -1, None]
        return entry

    def _plan_of(self, kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int) -> KernelPlan:
        """The plan of a launch shape (made on first sight): work, block split, touched granules."""
        key = (kernel.name, args, block_dim)
        known = self._plans.get(key)
        plan = known[1] if known is not None and known[0] is kernel else None  # a replaced kernel: anew
        if plan is None:
            work = kernel.work(args)
            reads: list[tuple[int, int]] = []
            writes: list[tuple[int, int]] = []
            for index, arg in enumerate(args):
                if isinstance(arg, TensorArg):
                    (writes if index in kernel.outputs else reads).append((arg.address, tensor_nbytes(arg)))
            fractions = tuple(kernel.block_fractions(work, block_dim))
            plan = KernelPlan(work, fractions, granules(reads), granules(writes))
            if len(self._plans) > CACHE_LIMIT:
                self._plans.clear()
                self._cost_cache.clear()  # keyed by id(plan): ids of dropped plans may be reused
                self._recent.clear()
            self._plans[key] = (kernel, plan)
        return plan
