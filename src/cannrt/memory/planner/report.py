"""A short report of a packing: peak, lower bound, % over the bound, time."""

from __future__ import annotations

from dataclasses import dataclass

from cannrt.memory.planner.buffers import Packing, lower_bound


def over_bound_pct(peak: int, bound: int) -> float:
    """How far `peak` is above `bound`, in percent of the bound (0.0 for an empty bound)."""
    return 100.0 * (peak - bound) / bound if bound > 0 else 0.0


@dataclass(frozen=True)
class Report:
    """What a plan achieved and what it cost."""

    buffers: int
    lower_bound: int
    capacity: int | None
    peak: int
    seconds: float
    solver: str
    optimal: bool

    @property
    def over_pct(self) -> float:
        """Peak above the lower bound, in percent."""
        return over_bound_pct(self.peak, self.lower_bound)

    @staticmethod
    def of(packing: Packing, seconds: float, capacity: int | None = None) -> Report:
        """Summarise a packing that took `seconds` to compute."""
        bound = lower_bound(packing.buffers)
        return Report(
            buffers=len(packing.buffers),
            lower_bound=bound,
            capacity=capacity,
            peak=packing.peak,
            seconds=seconds,
            solver=packing.solver,
            optimal=packing.optimal or packing.peak == bound,
        )

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs, in display order."""
        cap = f"{self.capacity:,}" if self.capacity is not None else "-"
        return [
            ("buffers", f"{self.buffers:,}"),
            ("peak", f"{self.peak:,}"),
            ("lower bound", f"{self.lower_bound:,}"),
            ("over bound", f"{self.over_pct:.3f} %"),
            ("capacity", cap),
            ("time", f"{self.seconds:.2f} s"),
            ("solver", self.solver + (" (optimal)" if self.optimal else "")),
        ]

    def text(self) -> str:
        """Plain-text rendering, one `label: value` per line."""
        width = max(len(label) for label, _ in self.rows())
        return "\n".join(f"{label:<{width}}  {value}" for label, value in self.rows())
