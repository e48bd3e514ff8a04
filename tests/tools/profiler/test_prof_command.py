"""`cannrt prof`: unmodified programs profiled with msprof's options, their exit codes passed through."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from profiler_records import task_slices

from cannrt.cli.prof import UsageError, child_command
from cannrt.tools.profiler import validate_trace

PROGRAMS = Path(__file__).parent / "programs"
OUTPUT = "mindstudio_profiler_output"


def cannrt_prof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cannrt", "prof", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def only_profile(root: Path) -> Path:
    (folder,) = root.glob("PROF_*")
    return folder / OUTPUT


def rows(folder: Path, prefix: str) -> list[dict[str, str]]:
    (path,) = folder.glob(f"{prefix}_*.csv")
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_an_unmodified_pyacl_program_is_profiled_under_cannrt_exec(tmp_path: Path) -> None:
    program = PROGRAMS / "acl_copies.py"
    done = cannrt_prof(f"--output={tmp_path / 'out'}", "--", "cannrt", "exec", str(program), "7", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert "copied: True" in done.stdout
    folder = only_profile(tmp_path / "out")
    assert f"profile written to {folder.parent}" in done.stderr
    prefixes = sorted(p.name.rsplit("_", 1)[0] for p in folder.iterdir())
    assert {"msprof", "op_summary", "task_time", "l2_cache", "api_statistic", "memory_record"} <= set(prefixes)
    (trace_file,) = folder.glob("msprof_*.json")
    trace = json.loads(trace_file.read_text())
    assert validate_trace(trace) == []
    kinds = [r["kernel_type"] for r in rows(folder, "task_time")]
    assert kinds.count("MEMCPY_ASYNC") == 2 and "STREAM_WAIT_EVENT" in kinds and "EVENT_RECORD" in kinds
    api = {r["API Name"]: int(r["Count"]) for r in rows(folder, "api_statistic")}
    assert api["aclrtMalloc"] == 2 and api["aclrtMemcpyAsync"] == 2 and api["aclrtMemcpy"] == 1
    memory = [int(r["Total Reserved(KB)"]) for r in rows(folder, "memory_record")]
    assert max(memory) >= 2 * 1024 and memory[-1] < max(memory)  # two 1 MiB buffers, freed at the end


def test_a_python_program_shows_the_op_names_of_its_launches(tmp_path: Path) -> None:
    program = PROGRAMS / "named_ops.py"
    done = cannrt_prof("--output=out", "--aic-metrics=Memory", f"--application=python3 {program}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = only_profile(tmp_path / "out")
    ops = rows(folder, "op_summary")
    assert [(r["Op Name"], r["OP Type"]) for r in ops[:2]] == [("layer0/MatMul", "matmul"), ("layer0/Gelu", "gelu")]
    assert len(ops) == 6 and "aic_main_mem_read_bw(GB/s)" in ops[0]
    (trace_file,) = folder.glob("msprof_*.json")
    names = {e["name"] for e in task_slices(json.loads(trace_file.read_text()))}
    assert {"layer2/MatMul", "layer2/Gelu"} <= names


def test_switches_off_leave_out_host_calls(tmp_path: Path) -> None:
    program = PROGRAMS / "named_ops.py"
    done = cannrt_prof("--output=out", "--ascendcl=off", "--", "python3", str(program), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = only_profile(tmp_path / "out")
    assert rows(folder, "api_statistic") == [] and len(rows(folder, "op_summary")) == 6


def test_a_failing_program_keeps_its_exit_code_and_its_profile(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("import cannrt\ncannrt.Device(0).stream().launch('nop')\nraise SystemExit(3)\n")
    done = cannrt_prof("--output=out", "--", sys.executable, str(script), cwd=tmp_path)
    assert done.returncode == 3
    assert len(rows(only_profile(tmp_path / "out"), "task_time")) <= 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--aic-metrics=Bogus", "--", "python3", "x.py"], "unknown --aic-metrics 'Bogus'"),
        (["--task-time=maybe", "--", "python3", "x.py"], "--task-time must be on or off"),
        (["--", "ls", "-l"], "cannrt prof runs Python programs"),
        ([], "no program to profile"),
        (["--", "python3", "missing.py"], "can't open file 'missing.py'"),
    ],
)
def test_bad_command_lines_get_one_line_and_exit_code_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = cannrt_prof(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_program_forms_map_to_the_child_modes() -> None:
    assert child_command(["cannrt", "exec", "app.py", "1"]) == ["exec", "app.py", "1"]
    assert child_command(["python3", "app.py", "-v"]) == ["script", "app.py", "-v"]
    assert child_command(["/usr/bin/python3.11", "-m", "pkg.main", "x"]) == ["module", "pkg.main", "x"]
    assert child_command(["app.py"]) == ["script", "app.py"]
    with pytest.raises(UsageError):
        child_command(["python3", "-c", "print(1)"])
