"""What the launch-shape tests share: a small SQ ring, kernel records, dumped op names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cannrt import ErrorCode
from cannrt.abi import SqeType
from cannrt.config import ChipSpec
from cannrt.runtime.core import Runtime

SQ_DEPTH = 8  # a small ring: the argument area has this many slots
MIB = 1 << 20
FAULT = ErrorCode.RT_VECTOR_CORE_EXCEPTION  # relu reading past its buffer, on the vector cores


def small_ring(make_runtime: Callable[..., Runtime]) -> Runtime:
    """A runtime whose SQs (and so argument areas) have SQ_DEPTH entries."""
    return make_runtime(chip=dataclasses.replace(ChipSpec(), sq_depth=SQ_DEPTH))


def kernel_records(prof: Any) -> list[Any]:
    """The kernel task records of a profile."""
    return [r for r in prof.records if r.sqe_type == SqeType.KERNEL]


def dumped_ops(files: Sequence[Path]) -> list[str]:
    """Op names of dump files (CANN names: op_type.op_name.occurrence.task_id.stream_id.timestamp)."""
    return sorted(f.name.split(".")[1] for f in files)
