"""`cannrt exec program.py [args...]`: run a pyACL program on the simulated NPU.

The program runs in a child Python process in which `import acl` (and `acl.rt`, `acl.util`,
...) resolves to `cannrt.acl` (also in Python processes the program starts, through a temporary
shim on PYTHONPATH); nothing named `acl` is installed globally. The program's
output, stdin and exit code pass through. The child runs `python -m cannrt.cli.exec
program.py [args...]`, which can also be used directly.
"""

from __future__ import annotations

import atexit
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence

import typer

ALIASED_SUBMODULES = ("constants", "media", "op", "prof", "rt", "util")
EXIT_NO_SCRIPT = 2  # as `python missing.py`


SHIM = f"""\"\"\"`import acl` is cannrt.acl during this `cannrt exec` run (a temporary shim).\"\"\"
import sys

import cannrt.acl as _facade

sys.modules[__name__] = _facade
for _name in {ALIASED_SUBMODULES!r}:
    sys.modules[f"acl.{{_name}}"] = getattr(_facade, _name)
"""


def install_acl_alias() -> None:
    """Make `import acl` and `import acl.<sub>` resolve to cannrt.acl in this process."""
    import cannrt.acl as facade

    sys.modules["acl"] = facade
    for name in ALIASED_SUBMODULES:
        sys.modules[f"acl.{name}"] = getattr(facade, name)


SHIM_ENV = "CANNRT_ACL_SHIM"
"""Set by `cannrt exec` to the shim directory it made (and removes) for the child."""


def write_shim(directory: str) -> None:
    """Write the `acl` package that imports cannrt.acl into directory."""
    os.makedirs(os.path.join(directory, "acl"))
    with open(os.path.join(directory, "acl", "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write(SHIM)


def install_acl_shim() -> None:
    """Put a temporary `acl` package on PYTHONPATH, so that Python processes the program starts
    (multiprocessing with spawn, subprocesses) import cannrt.acl as `acl` too. Under `cannrt
    exec` the parent made it (and removes it even if the program is killed); run directly, this
    process makes one and removes it at exit."""
    if os.environ.get(SHIM_ENV):
        return
    directory = tempfile.mkdtemp(prefix="cannrt-acl-")
    write_shim(directory)
    atexit.register(shutil.rmtree, directory, True)
    os.environ[SHIM_ENV] = directory
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = directory if not previous else os.pathsep.join([directory, previous])
    sys.path.append(directory)  # multiprocessing's spawn hands sys.path to its children


def run_program(script: str, args: Sequence[str]) -> None:
    """Run script as __main__ with sys.argv = [script, *args] and `acl` aliased (the child's job)."""
    install_acl_alias()
    install_acl_shim()
    run_script(script, args)


def run_script(script: str, args: Sequence[str]) -> None:
    """Run a Python script as __main__, as `python script args` would: sys.argv and sys.path[0] set,
    an uncaught exception printed without our frames and turned into exit code 1."""
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(path)
    try:
        runpy.run_path(script, run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # print it as `python program.py` would, without our frames
        tb = exc.__traceback__
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != path:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        raise SystemExit(1) from None


def run(script: str, args: Sequence[str]) -> int:
    """Run a pyACL program in a child process; returns its exit code (128 + n when killed by signal n)."""
    if not os.path.isfile(script):
        print(f"cannrt exec: can't open file {script!r}: no such file", file=sys.stderr)
        return EXIT_NO_SCRIPT
    command = [sys.executable, "-m", "cannrt.cli.exec", script, *args]
    with tempfile.TemporaryDirectory(prefix="cannrt-acl-") as directory:
        write_shim(directory)
        env = dict(os.environ)
        env[SHIM_ENV] = directory
        previous = env.get("PYTHONPATH")
        env["PYTHONPATH"] = directory if not previous else os.pathsep.join([directory, previous])
        return run_child(command, env)


def run_child(command: Sequence[str], env: dict[str, str]) -> int:
    """Run a child process to its end; its exit code (128 + n when killed by signal n, 130 when
    interrupted)."""
    try:
        completed = subprocess.run(command, check=False, env=env)
    except KeyboardInterrupt:
        return 130
    code = completed.returncode
    return 128 - code if code < 0 else code


def register(app: typer.Typer) -> None:
    """Add the `exec` command to the cannrt CLI."""

    @app.command(
        "exec",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    def exec_command(
        ctx: typer.Context,
        script: str = typer.Argument(..., help="pyACL program to run"),
    ) -> None:
        """Run a pyACL program with `import acl` resolving to cannrt.acl (arguments pass through)."""
        raise typer.Exit(run(script, list(ctx.args)))


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m cannrt.cli.exec program.py [args...]`: run the program in this process."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        print("usage: python -m cannrt.cli.exec program.py [args...]", file=sys.stderr)
        raise SystemExit(EXIT_NO_SCRIPT)
    script, rest = arguments[0], arguments[1:]
    if not os.path.isfile(script):
        print(f"cannrt exec: can't open file {script!r}: no such file", file=sys.stderr)
        raise SystemExit(EXIT_NO_SCRIPT)
    run_program(script, rest)


if __name__ == "__main__":
    main()
