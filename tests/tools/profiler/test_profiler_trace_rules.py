"""validate_trace: the Chrome trace rules Perfetto applies (REFERENCE.md section 9), each one caught."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cannrt.tools.profiler import validate_trace


def sound_trace() -> dict[str, Any]:
    """A small trace that keeps every rule: metadata, nested slices, B/E, a counter, a flow of each kind."""
    return {
        "displayTimeUnit": "ms",
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Host"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
            {"ph": "X", "name": "outer", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
            {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 2.0, "dur": 3.0},
            {"ph": "X", "name": "next", "pid": 1, "tid": 1, "ts": 10.0, "dur": 1.0},
            {"ph": "X", "name": "task", "pid": 2, "tid": 1, "ts": 5.0, "dur": 1.0},
            {"ph": "B", "name": "phase", "pid": 1, "tid": 2, "ts": 0.0},
            {"ph": "E", "name": "phase", "pid": 1, "tid": 2, "ts": 4.0},
            {"ph": "C", "name": "busy", "pid": 2, "tid": 0, "ts": 5.0, "args": {"cores": 3}},
            {"ph": "s", "name": "launch", "cat": "flow", "id": 1, "pid": 1, "tid": 1, "ts": 1.0, "bp": "e"},
            {"ph": "f", "name": "launch", "cat": "flow", "id": 1, "pid": 2, "tid": 1, "ts": 5.5, "bp": "e"},
            {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 3.0, "s": "t"},
            {"ph": "X", "name": "launch", "pid": 1, "tid": 3, "ts": 20, "dur": 3, "bind_id": 7, "flow_out": True},
            {"ph": "X", "name": "kernel", "pid": 2, "tid": 2, "ts": 23.5, "dur": 1, "bind_id": 7, "flow_in": True},
            {"ph": "X", "name": "on pid thread", "pid": 3, "ts": 1, "dur": 2},
        ],
    }


def test_a_sound_trace_has_no_problems() -> None:
    assert validate_trace(sound_trace()) == []


def _broken(change: str) -> dict[str, Any]:
    trace = copy.deepcopy(sound_trace())
    events = trace["traceEvents"]
    if change == "X without dur":
        del events[3]["dur"]
    elif change == "E without B":
        events[6]["ts"] = 5.0  # B now after E
    elif change == "B/E names cross":
        events[7]["name"] = "other"
    elif change == "counter arg not a number":
        events[8]["args"] = {"cores": "three"}
    elif change == "flow start without finish":
        del events[10]
    elif change == "flow finish without start":
        del events[9]
    elif change == "metadata other than names":
        events.append({"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "args": {"sort_index": 1}})
    elif change == "overlapping slices on one thread":
        events[3]["dur"] = 9.0  # inner now runs past outer's end without nesting
    elif change == "bound flow without its end":
        del events[13]
    elif change == "bound flow with two sources":
        events[13]["flow_out"], events[13]["flow_in"] = True, False
    elif change == "bound flow ending before it starts":
        events[13]["ts"] = 10.0
    elif change == "bound flow direction not a boolean":
        events[12]["flow_out"] = 1
    elif change == "bind_id without direction":
        del events[13]["flow_in"]
    elif change == "slice without tid overlaps its pid thread":
        events.append({"ph": "X", "name": "clash", "pid": 3, "tid": 3, "ts": 2, "dur": 2})
    elif change == "no traceEvents":
        trace.pop("traceEvents")
    return trace


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("X without dur", "dur"),
        ("E without B", "E without an open B"),
        ("B/E names cross", "do not nest"),
        ("counter arg not a number", "numbers"),
        ("flow start without finish", "one s and one f"),
        ("flow finish without start", "one s and one f"),
        ("metadata other than names", "only name processes and threads"),
        ("overlapping slices on one thread", "overlaps"),
        ("bound flow without its end", "needs one flow_out and a flow_in"),
        ("bound flow with two sources", "needs one flow_out and a flow_in"),
        ("bound flow ending before it starts", "ends before it starts"),
        ("bound flow direction not a boolean", "true or false"),
        ("bind_id without direction", "without flow_out or flow_in"),
        ("slice without tid overlaps its pid thread", "overlaps"),
        ("no traceEvents", "traceEvents"),
    ],
)
def test_each_broken_rule_is_reported(change: str, words: str) -> None:
    problems = validate_trace(_broken(change))
    assert problems and any(words in p for p in problems), problems


def test_slices_on_different_threads_may_overlap() -> None:
    trace = sound_trace()
    trace["traceEvents"].append({"ph": "X", "name": "other", "pid": 1, "tid": 9, "ts": 1.0, "dur": 20.0})
    assert validate_trace(trace) == []
