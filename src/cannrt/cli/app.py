"""The `cannrt` command: the typer application and its entry point; each command has its module in cli/."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="cannrt: the CANN runtime on a simulated NPU")


def _register_commands() -> None:
    """Attach the commands that register themselves (atc, exec, plan, prof, run)."""
    from cannrt.cli.atc import register as register_atc
    from cannrt.cli.exec import register as register_exec
    from cannrt.cli.plan import register as register_plan
    from cannrt.cli.prof import register as register_prof
    from cannrt.cli.run import register as register_run

    register_atc(app)
    register_exec(app)
    register_plan(app)
    register_prof(app)
    register_run(app)


@app.command()
def demo(
    batches: int = typer.Option(8, help="micro-batches to pipeline"),
    size: int = typer.Option(512, help="matrix edge (size x size fp16 matmul)"),
    chip: str = typer.Option("Ascend910B1", help="chip preset"),
    profile: str | None = typer.Option(
        None, "--profile", help="profile the pipelined run into this folder (msprof layout)"
    ),
) -> None:
    """Run the pipelined multi-stream workload and report modelled and wall time."""
    from cannrt.cli.demo import run_demo

    raise typer.Exit(run_demo(batches=batches, size=size, chip=chip, profile_dir=profile))


@app.command()
def compare(
    npu_dir: str = typer.Argument(..., help="dump folder of the run under test"),
    bench_dir: str = typer.Argument(None, help="dump folder of the benchmark run (default: a float64 re-run)"),
    out: str = typer.Option(None, help="write msprobe's compare CSV here"),
) -> None:
    """Compare two dumps tensor by tensor and name the first divergent op."""
    from cannrt.cli.compare import run_compare

    raise typer.Exit(run_compare(npu_dir, bench_dir, out))


_register_commands()


def main() -> None:
    """Entry point of the `cannrt` console script."""
    app()
