"""Conformance: profiling (acl.prof init / create_config / start / stop / finalize) and its files."""

from __future__ import annotations

import csv
import glob
import json
import os
import tempfile

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_AICORE_PIPE_UTILIZATION = 1
ACL_PROF_ACL_API, ACL_PROF_TASK_TIME, ACL_PROF_AICORE_METRICS = 0x1, 0x2, 0x4
FLOAT, ND = 0, 2


def workload(stream: int) -> None:
    data = np.ones(4096, np.float32)
    desc = acl.create_tensor_desc(FLOAT, [4096], ND)
    ptr = value(acl.rt.malloc(data.nbytes, 0), "malloc")
    out = value(acl.rt.malloc(data.nbytes, 0), "malloc")
    ok(acl.rt.memcpy_async(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, 1, stream), "copy")
    buffers = [acl.create_data_buffer(ptr, data.nbytes), acl.create_data_buffer(out, data.nbytes)]
    ok(acl.op.execute_v2("Relu", [desc], buffers[:1], [desc], buffers[1:], 0, stream), "Relu")
    ok(acl.rt.synchronize_stream(stream), "sync")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    stream = value(acl.rt.create_stream(), "create_stream")
    config = acl.prof.create_config([0], ACL_AICORE_PIPE_UTILIZATION, None, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME)
    expect(config != 0, True, "create_config")
    expect(acl.prof.start(config), ACL_ERROR_UNINITIALIZE, "start before prof.init")
    expect(acl.prof.finalize(), ACL_ERROR_UNINITIALIZE, "finalize before prof.init")
    with tempfile.TemporaryDirectory() as tmp:
        ok(acl.prof.init(tmp), "prof.init")
        expect(acl.prof.init(tmp), ACL_ERROR_REPEAT_INITIALIZE, "prof.init twice")
        expect(acl.prof.stop(config), ACL_ERROR_PROF_NOT_RUN, "stop before start")
        ok(acl.prof.start(config), "prof.start")
        expect(acl.prof.start(config), ACL_ERROR_PROF_ALREADY_RUN, "start twice")
        expect(acl.prof.finalize(), ACL_ERROR_PROF_ALREADY_RUN, "finalize while running")
        workload(stream)
        ok(acl.prof.stop(config), "prof.stop")
        ok(acl.prof.finalize(), "prof.finalize")
        folders = glob.glob(os.path.join(tmp, "PROF_*", "mindstudio_profiler_output"))
        expect(len(folders), 1, "one PROF_ folder")
        with open(glob.glob(os.path.join(folders[0], "task_time_*.csv"))[0]) as handle:
            rows = list(csv.DictReader(handle))
        expect(len(rows) >= 2, True, "a row per task (copy and kernel)")
        expect(any(r["kernel_name"] == "relu" for r in rows), True, "the Relu kernel is listed")
        for kind in ("op_summary", "l2_cache", "api_statistic"):
            expect(len(glob.glob(os.path.join(folders[0], f"{kind}_*.csv"))), 1, f"{kind} CSV written")
        with open(glob.glob(os.path.join(folders[0], "msprof_*.json"))[0]) as handle:
            trace = json.load(handle)
        expect(all("dur" in e for e in trace["traceEvents"] if e["ph"] == "X"), True, "X events carry dur")
    other = acl.prof.create_config([1], ACL_AICORE_PIPE_UTILIZATION, None, ACL_PROF_TASK_TIME)
    with tempfile.TemporaryDirectory() as tmp:
        ok(acl.prof.init(tmp), "prof.init")
        expect(acl.prof.start(other), ACL_ERROR_RT_CONTEXT_NULL, "device 1 was not set")
        ok(acl.prof.finalize(), "prof.finalize")
    expect(acl.prof.create_config([], 1, None, 2), 0, "no devices")
    expect(acl.prof.create_config([0], 77, None, 2), 0, "unknown metric")
    ok(acl.prof.destroy_config(config), "destroy_config")
    ok(acl.prof.destroy_config(other), "destroy_config")
    expect(acl.prof.destroy_config(config), ACL_ERROR_INVALID_PARAM, "destroy twice")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("prof")


if __name__ == "__main__":
    main()
