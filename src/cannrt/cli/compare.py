"""`cannrt compare`: msprobe-style accuracy compare of two dumps on the terminal."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cannrt.tools.compare import compare_dirs, first_divergent, first_nan_inf, write_csv
from cannrt.tools.dump import load_dump_dir
from cannrt.tools.reference import write_reference_dump


def run_compare(npu_dir: str, bench_dir: str | None, out: str | None) -> int:
    """Print the comparison; exit code 0 if every tensor reaches accuracy, 1 otherwise, 2 on bad input."""
    console = Console()
    if not Path(npu_dir).is_dir():
        console.print(f"[red]no dump folder {npu_dir}[/red]")
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        if bench_dir is None:
            bench_dir = scratch
            written = write_reference_dump(npu_dir, bench_dir)
            console.print(f"bench: float64 re-run of {len(written)} ops from their dumped inputs")
        rows = compare_dirs(npu_dir, bench_dir)
    if not rows:
        console.print(f"[red]no dump files under {npu_dir}[/red]")
        return 2
    table = Table(title=f"compare {npu_dir}")
    for column in (
        "tensor",
        "dtype",
        "shape",
        "Cosine",
        "MaxAbsErr",
        "MaxRelErr",
        "1/1000 ratio",
        "reached",
        "message",
    ):
        table.add_column(column)
    for row in rows:
        c = row.cells()
        style = "" if row.reached else "red"
        table.add_row(str(c[0]), str(c[2]), str(c[4]), f"{c[6]:.6f}", f"{c[8]:.3g}", f"{c[9]:.3g}", f"{c[10]:.3f}",
                      str(c[20]), str(c[21]), style=style)  # fmt: skip
    console.print(table)
    if out:
        console.print(f"written {write_csv(rows, out)}")
    divergent = first_divergent(rows)
    if divergent is None:
        console.print(
            "[green]no op diverges[/green]" if all(r.reached for r in rows) else "no single first divergent op"
        )
    else:
        console.print(f"[red]first divergent op: {divergent.op_name} ({divergent.op_type}), task {divergent.task_id} "
                      f"on stream {divergent.stream_id}, file {divergent.path.name}[/red]")  # fmt: skip
    produced = first_nan_inf(load_dump_dir(npu_dir))
    if produced is None:
        console.print("no op produced NaN/Inf")
    else:
        where = f"task {produced.task_id} on stream {produced.stream_id}, file {produced.path.name}"
        console.print(f"[red]first op that produced NaN/Inf: {produced.op_name} ({produced.op_type}), {where}[/red]")
    return 0 if all(r.reached for r in rows) else 1
