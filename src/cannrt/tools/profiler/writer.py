"""The msprof folder: `PROF_<id>_<ts>/mindstudio_profiler_output/` with the JSON timeline and CSVs."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cannrt.abi import TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import summary
from cannrt.tools.profiler.records import HostSlice
from cannrt.tools.profiler.trace import chrome_trace

OUTPUT_DIR = "mindstudio_profiler_output"


def make_prof_dir(root: str | Path, stamp: str) -> Path:
    """A new `PROF_<nnnnnn>_<stamp>` folder under root (numbered after the ones already there)."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    number = len(list(base.glob("PROF_*"))) + 1
    while True:
        folder = base / f"PROF_{number:06d}_{stamp}"
        try:
            (folder / OUTPUT_DIR).mkdir(parents=True)
            return folder
        except FileExistsError:
            number += 1


def write_csv(path: Path, table: summary.Table) -> None:
    """One msprof CSV: header row, then the rows."""
    head, rows = table
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(head)
        writer.writerows(rows)


def write_profile(
    root: str | Path,
    records: Sequence[TaskRecord],
    slices: Sequence[HostSlice],
    chip: ChipSpec,
    group: str = "PipeUtilization",
    stamp: str | None = None,
    extra: Sequence[dict[str, Any]] = (),
) -> Path:
    """Write msprof_<ts>.json, op_summary, task_time, l2_cache and api_statistic CSVs; returns PROF_ dir."""
    stamp = stamp or time.strftime("%Y%m%d%H%M%S")
    folder = make_prof_dir(root, stamp)
    out = folder / OUTPUT_DIR
    trace: dict[str, Any] = chrome_trace(records, slices, chip, extra)
    (out / f"msprof_{stamp}.json").write_text(json.dumps(trace, separators=(",", ":")))
    write_csv(out / f"op_summary_{stamp}.csv", summary.op_summary(records, chip, group))
    write_csv(out / f"task_time_{stamp}.csv", summary.task_time(records))
    write_csv(out / f"l2_cache_{stamp}.csv", summary.l2_cache(records))
    write_csv(out / f"api_statistic_{stamp}.csv", summary.api_statistic(slices))
    return folder
