"""The timeline's shortcut for a lone stream waiting on its next arrival makes the same decisions
as the ARRIVE event it replaces: random multi-stream programs give identical records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cannrt.device import timeline
from cannrt.runtime.core import Runtime

US = 1000

steps = st.lists(
    st.tuples(
        st.sampled_from(["spin", "nop", "record_wait", "pause", "query"]),
        st.integers(0, 3),  # stream
        st.integers(1, 40),  # microseconds (spin length, pause length)
        st.sampled_from([1, 2, 24]),  # block_dim
    ),
    min_size=1,
    max_size=40,
)


def _run(make_runtime: Callable[..., Runtime], program: list[tuple[str, int, int, int]]) -> list[Any]:
    rt = make_runtime()
    ctx = rt.set_device(0)
    streams = [ctx.create_stream(priority=p) for p in (0, 3, 3, 7)]
    event = ctx.create_event()
    rt.driver.trace_start(0)
    for op, index, micros, block_dim in program:
        stream = streams[index]
        if op == "spin":
            rt.launch(stream, "spin", block_dim, [micros * US])
        elif op == "nop":
            rt.launch(stream, "nop", block_dim, [])
        elif op == "record_wait":
            event.record(stream)
            event.wait_on(streams[(index + 1) % 4])
        elif op == "pause":
            rt.host_cost(micros * US)
        else:
            stream.query()
    rt.synchronize_device(0)
    return [(r.stream_id, r.task_id, r.start_ns, r.end_ns, r.cores) for r in rt.driver.trace_stop(0, rt.host_time_ns)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps)
def test_random_programs_are_timed_the_same_with_and_without_the_shortcut(
    make_runtime: Callable[..., Runtime], program: list[tuple[str, int, int, int]]
) -> None:
    with_jump = _run(make_runtime, program)
    try:
        timeline.ARRIVAL_JUMP = False
        without = _run(make_runtime, program)
    finally:
        timeline.ARRIVAL_JUMP = True
    assert with_jump == without


def test_the_shortcut_is_on_by_default() -> None:
    assert timeline.ARRIVAL_JUMP
