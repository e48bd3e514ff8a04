"""The `cannrt plan` command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cannrt.memory.planner.api import plan
from cannrt.memory.planner.buffers import Buffer, Packing, PlannerError
from cannrt.memory.planner.csvio import capacity_from_name, read_csv, write_solution
from cannrt.memory.planner.report import Report


def plan_command(
    file: Annotated[Path, typer.Argument(help="MiniMalloc CSV: id,lower,upper,size[,alignment]")],
    capacity: Annotated[
        int | None,
        typer.Option(help="bytes available (default: from a name like A.1048576.csv, else none)"),
    ] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", min=0.0, help="search time limit, seconds")] = 10.0,
    out: Annotated[Path | None, typer.Option("--out", help="write the solution CSV here")] = None,
) -> None:
    """Pack the buffers of FILE at offsets and print the report."""
    err = Console(stderr=True)
    try:
        cap = capacity if capacity is not None else capacity_from_name(file)
        buffers = read_csv(file)
        started = time.monotonic()
        packing = _run(buffers, cap, time_limit, err)
        seconds = time.monotonic() - started
    except PlannerError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    typer.echo(Report.of(packing, seconds, cap).text())
    if out is not None:
        write_solution(out, packing)
        typer.echo(f"wrote {out}")


def _run(buffers: list[Buffer], capacity: int | None, time_limit: float, err: Console) -> Packing:
    """Plan with a spinner on stderr that shows the best peak found so far."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("planning", total=None)

        def tick(elapsed: float, peak: int) -> None:
            bar.update(task, description=f"searching: best peak {peak:,} after {elapsed:.1f} s")

        return plan(buffers, capacity, time_limit, progress=tick)


def register(app: typer.Typer) -> None:
    """Add the `plan` command to the `cannrt` application."""
    app.command("plan")(plan_command)
