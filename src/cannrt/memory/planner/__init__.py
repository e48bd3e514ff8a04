"""Static memory planner: offsets for buffers with known lifetimes and sizes.

`plan(buffers, capacity=None, time_limit=...) -> Packing` is the entry point; every packing it
returns has been validated (no two buffers overlap in both time and address, alignment and
capacity respected).
"""

from __future__ import annotations

from cannrt.memory.planner.api import DoesNotFitError, NotFoundError, plan
from cannrt.memory.planner.buffers import (
    Buffer,
    InfeasibleError,
    InvalidBufferError,
    InvalidPackingError,
    Packing,
    PlannerError,
    lower_bound,
    validate,
)
from cannrt.memory.planner.csvio import CsvFormatError, parse_csv, read_csv, write_solution
from cannrt.memory.planner.greedy import greedy, greedy_by_size

__all__ = [
    "Buffer",
    "CsvFormatError",
    "DoesNotFitError",
    "InfeasibleError",
    "InvalidBufferError",
    "InvalidPackingError",
    "NotFoundError",
    "Packing",
    "PlannerError",
    "greedy",
    "greedy_by_size",
    "lower_bound",
    "parse_csv",
    "plan",
    "read_csv",
    "validate",
    "write_solution",
]
