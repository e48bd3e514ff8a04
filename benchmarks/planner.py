"""Benchmark the static memory planner on the MiniMalloc and idealloc suites.

    python benchmarks/planner.py                     # every instance, 60 s limit each
    python benchmarks/planner.py --only A,C,resnet50 --time-limit 20

Per instance: buffers, lower bound, capacity, our peak, % over the bound, seconds, and the same
for the plain greedy-by-size baseline run in the same process (ratio = our peak / baseline peak).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cannrt.memory.planner import NotFoundError, greedy_by_size, lower_bound, plan, read_csv
from cannrt.memory.planner.buffers import Packing
from cannrt.memory.planner.csvio import capacity_from_name
from cannrt.memory.planner.report import over_bound_pct

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "memplan"
SUITES = {"minimalloc": "minimalloc/challenging/*.csv", "idealloc": "idealloc/*.csv"}


@dataclass(frozen=True)
class Row:
    """One instance's results."""

    name: str
    buffers: int
    bound: int
    capacity: int | None
    peak: int
    seconds: float
    fits: bool
    base_peak: int
    base_seconds: float


def run_one(path: Path, time_limit: float) -> Row:
    """Plan one instance with our planner and with the baseline."""
    buffers = read_csv(path)
    capacity = capacity_from_name(path)
    started = time.monotonic()
    try:
        packing: Packing = plan(buffers, capacity=capacity, time_limit=time_limit)
        fits = True
    except NotFoundError as exc:
        packing, fits = exc.best, False
    seconds = time.monotonic() - started
    started = time.monotonic()
    base = greedy_by_size(buffers)
    base_seconds = time.monotonic() - started
    name = path.name.split(".")[0]
    bound = lower_bound(buffers)
    return Row(name, len(buffers), bound, capacity, packing.peak, seconds, fits, base.peak, base_seconds)


def table(rows: list[Row]) -> Table:
    """The results as a rich table."""
    out = Table(title="static memory planner")
    heads = ["instance", "buffers", "lower bound", "capacity", "peak", "% over", "s", "fits"]
    heads += ["greedy-size peak", "% over", "s", "peak ratio"]
    for h in heads:
        out.add_column(h, justify="left" if h == "instance" else "right")
    for r in rows:
        cap = f"{r.capacity:,}" if r.capacity is not None else "-"
        fits = "yes" if r.fits and (r.capacity is None or r.peak <= r.capacity) else "NO"
        out.add_row(
            r.name, f"{r.buffers:,}", f"{r.bound:,}", cap, f"{r.peak:,}",
            f"{over_bound_pct(r.peak, r.bound):.3f}", f"{r.seconds:.2f}", fits,
            f"{r.base_peak:,}", f"{over_bound_pct(r.base_peak, r.bound):.3f}",
            f"{r.base_seconds:.2f}", f"{r.peak / r.base_peak:.3f}" if r.base_peak else "-",
        )  # fmt: skip
    return out


def instances(data: Path, suites: list[str], only: set[str] | None) -> list[Path]:
    """Instance files of the chosen suites, filtered by name (the part before the first dot)."""
    paths = [p for s in suites for p in sorted(data.glob(SUITES[s]))]
    return [p for p in paths if only is None or p.name.split(".")[0] in only]


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the instances, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="memplan data folder")
    parser.add_argument("--suite", choices=[*SUITES, "all"], default="all")
    parser.add_argument("--only", help="comma-separated instance names, e.g. A,C,resnet50")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance")
    args = parser.parse_args(argv)
    suites = list(SUITES) if args.suite == "all" else [args.suite]
    only = set(args.only.split(",")) if args.only else None
    paths = instances(args.data, suites, only)
    if not paths:
        parser.error(f"no instances found under {args.data}")
    console = Console()
    rows = []
    for path in paths:
        rows.append(run_one(path, args.time_limit))
        console.print(f"{path.name}: peak {rows[-1].peak:,} in {rows[-1].seconds:.2f} s")
    console.print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
