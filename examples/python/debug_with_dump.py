"""Find the op that loses accuracy: dump a small graph and compare it with a float64 re-run."""

from __future__ import annotations

import tempfile

import numpy as np

import cannrt
from cannrt.tools.compare import compare_dirs, first_divergent
from cannrt.tools.reference import write_reference_dump


def main() -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x = device.array(np.full((64, 64), 200.0, np.float16))
    squared = device.empty((64, 64), np.float16)
    out = device.empty((64, 64), np.float32)
    folder = tempfile.mkdtemp()
    with cannrt.dump(f"{folder}/npu"):
        stream.launch("mul", x, x, squared, name="square")  # 40000 fits fp16
        stream.launch("mul", squared, squared, squared, name="fourth_power")  # 1.6e9 overflows fp16
        stream.launch("cast", squared, out, name="to_fp32")
    write_reference_dump(f"{folder}/npu", f"{folder}/bench")
    rows = compare_dirs(f"{folder}/npu", f"{folder}/bench")
    for row in rows:
        print(f"{row.op.op_name:>13} {row.npu.label:<9} reached={row.reached} {row.message}")
    culprit = first_divergent(rows)
    print("first divergent op:", culprit.op_name if culprit else None)
    assert culprit is not None and culprit.op_name == "fourth_power"


if __name__ == "__main__":
    main()
