"""The "dump" section of the acl.json given to acl.init dumps a pyACL program's operators."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from cannrt.tools.dump import load_dump_dir

MODEL_DIR = Path(__file__).parent.parent.parent / "examples" / "acl" / "op_models"
PROGRAM = """
import sys
import numpy as np
import acl

def ok(ret):
    assert ret == 0, (ret, acl.get_recent_err_msg())

ok(acl.init(sys.argv[1]))
ok(acl.rt.set_device(0))
ok(acl.op.set_model_dir(sys.argv[2]))
stream, ret = acl.rt.create_stream(); ok(ret)
tensors = []
for array in (np.full((8, 16), 1.5, np.float16), np.full((8, 16), 2.0, np.float16), np.zeros((8, 16), np.float16)):
    desc = acl.create_tensor_desc(1, [8, 16], 2)
    ptr, ret = acl.rt.malloc(array.nbytes, 0); ok(ret)
    ok(acl.rt.memcpy(ptr, array.nbytes, acl.util.numpy_to_ptr(array), array.nbytes, 1))
    tensors.append((desc, acl.create_data_buffer(ptr, array.nbytes)))
attr = acl.op.create_attr()
(a, a_buf), (b, b_buf), (c, c_buf) = tensors
ok(acl.op.execute_v2("Add", [a, b], [a_buf, b_buf], [c], [c_buf], attr, stream))
ok(acl.rt.synchronize_stream(stream))
ok(acl.rt.reset_device(0))
ok(acl.finalize())
print("done")
"""


def _run(tmp_path: Path, section: dict[str, object]) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"dump": section}))
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    command = [sys.executable, "-m", "cannrt", "exec", str(program), str(config), str(MODEL_DIR)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_dump_op_switch_on_dumps_every_single_op(tmp_path: Path) -> None:
    result = _run(tmp_path, {"dump_path": str(tmp_path / "dump"), "dump_mode": "all", "dump_op_switch": "on"})
    assert result.returncode == 0, result.stderr
    (op,) = load_dump_dir(tmp_path / "dump")
    assert op.op_type == "Add" and [t.label for t in op.tensors] == ["input.0", "input.1", "output.2"]
    output = op.role("output")[0].array
    assert output is not None and np.all(output == np.float16(3.5))


def test_a_dump_list_without_the_op_writes_nothing_and_output_mode_skips_inputs(tmp_path: Path) -> None:
    listed = {"dump_path": str(tmp_path / "none"), "dump_list": [{"model_name": "m", "layer": ["conv1"]}]}
    assert _run(tmp_path, listed).returncode == 0
    assert load_dump_dir(tmp_path / "none") == []
    outputs = {"dump_path": str(tmp_path / "out"), "dump_list": [{"layer": ["add"]}], "dump_mode": "output"}
    assert _run(tmp_path, outputs).returncode == 0
    (op,) = load_dump_dir(tmp_path / "out")
    assert [t.label for t in op.tensors] == ["output.2"]


def test_a_dump_section_without_a_path_fails_acl_init(tmp_path: Path) -> None:
    result = _run(tmp_path, {"dump_mode": "all"})
    assert result.returncode != 0
    assert "dump_path" in result.stderr + result.stdout
