"""`cannrt exec program.py [args...]`: `import acl` resolves to cannrt.acl for that run only; the
program's arguments, input, output and exit code pass through."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from acl_harness import cannrt_exec, clean_env

from cannrt.cli import exec as acl_exec

ECHO_PROGRAM = """
import sys
import acl
import acl.rt
from acl import util
import acl.op as op
import cannrt.acl

assert acl is cannrt.acl and acl.rt is cannrt.acl.rt and util is cannrt.acl.util and op is cannrt.acl.op
assert __name__ == "__main__" and sys.argv[0].endswith("echo.py")
print("args", sys.argv[1:])
print("stdin", sys.stdin.read().strip())
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_arguments_input_output_and_exit_code_pass_through(tmp_path: Path) -> None:
    script = write(tmp_path, "echo.py", ECHO_PROGRAM)
    command = [shutil.which("cannrt") or "cannrt", "exec"]
    run = cannrt_exec(script, "3", "--help", "-x", command=command, stdin="hello\n")
    assert run.returncode == 3, run.explain()
    assert "args ['3', '--help', '-x']" in run.stdout
    assert "stdin hello" in run.stdout
    assert "to stderr" in run.stderr


def test_python_dash_m_cannrt_exec_works_too(tmp_path: Path) -> None:
    script = write(tmp_path, "echo.py", ECHO_PROGRAM)
    run = cannrt_exec(script, "0", command=[sys.executable, "-m", "cannrt", "exec"])
    assert run.returncode == 0, run.explain()
    assert "args ['0']" in run.stdout


SPAWNING_PROGRAM = """
import multiprocessing
import subprocess
import sys

import acl


def child(queue):
    import acl

    queue.put((acl.__name__, acl.init(), acl.rt.set_device(0), acl.finalize()))


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    print("spawned", queue.get(timeout=60))
    process.join()
    code = "import acl.util, acl; print(acl.__name__, acl.util.__name__)"
    print("subprocess", subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
"""


def test_python_processes_the_program_starts_import_acl_too(tmp_path: Path) -> None:
    script = write(tmp_path, "spawning.py", SPAWNING_PROGRAM)
    run = cannrt_exec(script, command=[sys.executable, "-m", "cannrt.cli.exec"])
    assert run.returncode == 0, run.explain()
    assert "spawned ('cannrt.acl', 0, 0, 0)" in run.stdout
    assert "subprocess cannrt.acl cannrt.acl.util" in run.stdout


def test_nothing_named_acl_is_installed_globally(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import acl"], capture_output=True, text=True, env=clean_env(), cwd=tmp_path
    )
    assert done.returncode == 1
    assert "No module named 'acl'" in done.stderr


def test_an_uncaught_exception_exits_1_with_a_traceback_starting_at_the_program(tmp_path: Path) -> None:
    script = write(tmp_path, "boom.py", "import acl\n\ndef f():\n    raise ValueError('boom')\n\nf()\n")
    run = cannrt_exec(script, command=[sys.executable, "-m", "cannrt.cli.exec"])
    assert run.returncode == 1
    assert "ValueError: boom" in run.stderr
    assert "runpy" not in run.stderr and "cli/exec" not in run.stderr
    assert run.stderr.splitlines()[1].strip().startswith(f'File "{script}"')


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_program_killed_by_a_signal_exits_128_plus_the_signal_and_leaves_no_shim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = write(tmp_path, "killed.py", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("TMPDIR", str(temp))  # the child's temporary files too
    assert acl_exec.run(str(script), []) == 128 + signal.SIGTERM
    assert list(temp.iterdir()) == []


def test_a_missing_program_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert acl_exec.run(str(tmp_path / "missing.py"), []) == 2
    assert "can't open file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        acl_exec.main([])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        acl_exec.main([str(tmp_path / "missing.py")])


def test_register_adds_an_exec_command_that_passes_extra_arguments() -> None:
    import typer

    app = typer.Typer()

    @app.command()
    def other() -> None:
        """A second command so that typer keeps subcommands."""

    acl_exec.register(app)
    names = [command.name for command in app.registered_commands]
    assert "exec" in names
    exec_info = next(c for c in app.registered_commands if c.name == "exec")
    settings = exec_info.context_settings or {}
    assert settings["allow_extra_args"] and settings["ignore_unknown_options"]
    assert settings["allow_interspersed_args"] is False
