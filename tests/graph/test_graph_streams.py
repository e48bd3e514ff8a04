"""Stream assignment: one stream by default; with parallel streams, branches spread over streams with
events pruned to one wait per producer per consumer stream, the task list free of races, and the
results unchanged."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
from checks import check_plan, check_races
from om_interpreter import run

from cannrt.graph import CompileOptions, compile_model
from cannrt.graph.streams import assign_streams, schedule
from cannrt.om import EventRecordTask, EventWaitTask

PARALLEL = CompileOptions(precision_mode="force_fp32", parallel_streams=True, max_streams=4)


def test_default_is_one_stream_without_events():
    deps = [[], [0], [0], [1, 2]]
    assert assign_streams(deps, parallel=False) == [0, 0, 0, 0]
    sched = schedule([0, 0, 0, 0], deps)
    assert sched.num_events == 0 and not any(sched.waits)


def test_a_diamond_gets_two_streams_and_one_event():
    deps = [[], [0], [0], [1, 2]]
    streams = assign_streams(deps, parallel=True)
    assert streams == [0, 0, 1, 0]
    sched = schedule(streams, deps)
    # node 2 on stream 1 waits for node 0; node 3 waits for node 2
    assert sched.num_events == 2 and sched.waits == [[], [], [0], [1]]
    assert sched.record == [0, None, 1, None]


def test_waits_are_pruned_through_stream_order_and_third_streams():
    # 0 (s0) -> 1 (s1) -> 2 (s0) reads 0 and 1: stream 0 already has 0 before 2, and waits for 1 once
    sched = schedule([0, 1, 0, 1], [[], [0], [0, 1], [0, 1, 2]])
    assert sched.waits == [[], [0], [1], [2]]
    # node 3 on stream 1: needs 0 (known through its wait for 0 before node 1) and 2: one wait
    assert len(sched.waits[3]) == 1


def test_parallel_branches_keep_the_results_and_are_race_free():
    model = gm.branches()
    compiled = compile_model(model, PARALLEL)
    assert compiled.num_streams == 3
    tasks = compiled.gears[0].tasks
    streams_used = {t.stream for t in tasks}
    assert streams_used == {0, 1, 2}
    assert any(isinstance(t, EventWaitTask) for t in tasks) and any(isinstance(t, EventRecordTask) for t in tasks)
    check_plan(compiled)
    assert check_races(compiled) > 0
    x = gm.RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(compiled, [x])[0], lm.run_onnxruntime(model, {"x": x})[0], rtol=1e-6)


def test_inception_on_parallel_streams():
    model = lm.load("inception_v1")
    compiled = compile_model(model, PARALLEL)
    gear = compiled.gears[0]
    assert compiled.num_streams == 4
    check_plan(compiled)
    assert check_races(compiled) > 0
    waits: dict[tuple[int, int], int] = {}
    record_stream = {t.event: t.stream for t in gear.tasks if isinstance(t, EventRecordTask)}
    for t in gear.tasks:
        if isinstance(t, EventWaitTask):
            assert record_stream[t.event] != t.stream
            waits[(t.event, t.stream)] = waits.get((t.event, t.stream), 0) + 1
    assert max(waits.values()) == 1  # one wait per producer (event) per consumer stream
    # parallel lifetimes cost memory: never less than the single-stream plan
    single = compile_model(model, CompileOptions(precision_mode="force_fp32"))
    assert gear.feature_map_size >= single.gears[0].feature_map_size
    inputs = list(lm.input_for(model).values())
    np.testing.assert_allclose(run(compiled, inputs)[0], run(single, inputs)[0], rtol=1e-6)
