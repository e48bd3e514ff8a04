"""`cannrt prof`: msprof for programs on the simulated NPU, and `cannrt prof report DIR`.

    cannrt prof --output=DIR [--aic-metrics=GROUP] [--task-time=on|off] [--ascendcl=on|off] -- PROGRAM ARGS
    cannrt prof --output=DIR --application="python3 app.py args"
    cannrt prof report DIR [--html OUT.html]

PROGRAM is `python3 app.py` (or `python3 -m module`, or `app.py`) for a Python program using cannrt,
or `cannrt exec app.py` for a pyACL program. It runs unmodified in a child Python process that
profiles the whole run (every device it opens, as msprof's environment switches do in CANN) and
writes `DIR/PROF_<id>_<ts>/mindstudio_profiler_output/` when it exits; the program's output,
stdin and exit code pass through. The child runs `python -m cannrt.cli.prof MODE TARGET ARGS`
with its options in CANNRT_PROF_OPTIONS.
"""

from __future__ import annotations

import json
import os
import runpy
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import typer

from cannrt.cli.exec import run_child, run_script
from cannrt.tools.profiler.metrics import GROUPS

OPTIONS_ENV = "CANNRT_PROF_OPTIONS"
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line `cannrt prof` cannot run (printed as one line, exit code 2)."""


def child_command(argv: Sequence[str]) -> list[str]:
    """The child's arguments (MODE TARGET ARGS) for a program command line."""
    if not argv:
        raise UsageError("no program to profile: give `-- PROGRAM ARGS` or --application")
    head, rest = os.path.basename(argv[0]), list(argv[1:])
    if head == "cannrt" and rest[:1] == ["exec"]:
        if len(rest) < 2:
            raise UsageError("`cannrt exec` needs a program")
        return ["exec", *rest[1:]]
    if head.startswith("python"):
        if rest[:1] == ["-m"] and len(rest) >= 2:
            return ["module", *rest[1:]]
        if rest and not rest[0].startswith("-"):
            return ["script", *rest]
        raise UsageError(f"cannot profile {shlex.join(argv)!r}: give a script or -m module")
    if head.endswith(".py"):
        return ["script", *argv]
    raise UsageError(
        f"cannot profile {argv[0]!r}: cannrt prof runs Python programs (`python3 app.py`, `cannrt exec app.py`)"
    )


def _prof_dirs(output: Path) -> set[Path]:
    return set(output.glob("PROF_*")) if output.is_dir() else set()


def run(argv: Sequence[str], output: str, aic_metrics: str, task_time: bool, ascendcl: bool) -> int:
    """Profile a program in a child process; returns its exit code (128 + n when killed by signal n)."""
    command = child_command(argv)
    if command[0] in ("exec", "script") and not os.path.isfile(command[1]):
        print(f"cannrt prof: can't open file {command[1]!r}: no such file", file=sys.stderr)
        return EXIT_USAGE
    root = Path(output).resolve()
    before = _prof_dirs(root)
    options = {"output": str(root), "aic_metrics": aic_metrics, "task_time": task_time, "ascendcl": ascendcl}
    env = dict(os.environ)
    env[OPTIONS_ENV] = json.dumps(options)
    code = run_child([sys.executable, "-m", "cannrt.cli.prof", *command], env)
    written = sorted(_prof_dirs(root) - before)
    for folder in written:
        print(f"cannrt prof: profile written to {folder} (summary: cannrt prof report {folder})", file=sys.stderr)
    if not written:
        print("cannrt prof: the program wrote no profile (it did not exit normally)", file=sys.stderr)
    return code


def _switch(name: str, value: str) -> bool:
    if value not in ("on", "off"):
        raise UsageError(f"--{name} must be on or off, got {value!r}")
    return value == "on"


def register(app: typer.Typer) -> None:
    """Add the `prof` command (and `prof report`) to the cannrt CLI."""

    @app.command(
        "prof",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    def prof_command(
        ctx: typer.Context,
        output: str = typer.Option(".", "--output", help="folder for the PROF_ directory"),
        aic_metrics: str = typer.Option("PipeUtilization", "--aic-metrics", help=f"PMU group: {', '.join(GROUPS)}"),
        task_time: str = typer.Option("on", "--task-time", help="collect device tasks (on|off)"),
        ascendcl: str = typer.Option("on", "--ascendcl", help="collect host API calls (on|off)"),
        application: str = typer.Option(None, "--application", help='the program as one string: "python3 app.py"'),
    ) -> None:
        """Profile a program msprof style (`-- PROGRAM ARGS`), or summarise one (`report DIR`)."""
        args = list(ctx.args)
        if args[:1] == ["report"] and application is None:
            raise typer.Exit(report_main(args[1:]))
        try:
            if aic_metrics not in GROUPS:
                raise UsageError(f"unknown --aic-metrics {aic_metrics!r}; known: {', '.join(GROUPS)}")
            switches = _switch("task-time", task_time), _switch("ascendcl", ascendcl)
            argv = shlex.split(application) if application is not None else args
            code = run(argv, output, aic_metrics, *switches)
        except UsageError as exc:
            print(f"cannrt prof: {exc}", file=sys.stderr)
            code = EXIT_USAGE
        raise typer.Exit(code)


def report_main(args: Sequence[str]) -> int:
    """`cannrt prof report DIR [--html OUT.html]`: the terminal summary, and the HTML page if asked."""
    from cannrt.tools.profiler.report import ReportError, find_report, render_text

    report = typer.Typer(add_completion=False)

    @report.command()
    def summarise(
        directory: str = typer.Argument(..., help="an output folder, a PROF_ folder or its mindstudio_profiler_output"),
        html: str = typer.Option(None, "--html", help="also write a self-contained HTML report here"),
        top: int = typer.Option(10, "--top", help="kernels to list"),
    ) -> None:
        """Summarise a profile: top kernels, pipe utilisation and bounds, overlap, copies, API calls."""
        try:
            data = find_report(directory)
            print(render_text(data, top), end="")
            if html is not None:
                from cannrt.tools.profiler.html import write_html

                print(f"HTML report written to {write_html(data, html)}")
        except ReportError as exc:
            print(f"cannrt prof report: {exc}", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE) from None

    try:
        code = typer.main.get_command(report)(list(args), prog_name="cannrt prof report", standalone_mode=False)
    except Exception as exc:  # click's usage errors (a missing DIR, an unknown option)
        print(f"cannrt prof report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code if isinstance(code, int) else 0


def main(argv: Sequence[str] | None = None) -> None:
    """The child: start the whole-process profile, then run the program (MODE TARGET ARGS)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) < 2 or arguments[0] not in ("exec", "script", "module"):
        print("usage: python -m cannrt.cli.prof exec|script|module TARGET [args...]", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    options = json.loads(os.environ.pop(OPTIONS_ENV, "{}") or "{}")
    from cannrt.api.profile import start_program_profile

    start_program_profile(
        options.get("output", "."),
        options.get("aic_metrics", "PipeUtilization"),
        ascendcl=bool(options.get("ascendcl", True)),
        task_time=bool(options.get("task_time", True)),
    )
    mode, target, rest = arguments[0], arguments[1], arguments[2:]
    if mode == "exec":
        from cannrt.cli.exec import run_program

        run_program(target, rest)
    elif mode == "module":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        run_script(target, rest)


if __name__ == "__main__":
    main()
