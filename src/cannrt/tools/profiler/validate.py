"""A checker of the Chrome trace rules Perfetto applies on import (REFERENCE.md section 9).

`validate_trace(obj)` returns one message per broken rule (empty when the trace is sound):
X needs a numeric dur; B/E nest per thread; C args are numbers; flows s/t/f match by id; flows
bound to slices (v2: "bind_id" with boolean "flow_out" / "flow_in" on X/B events) have one source
and at least one end, no later than them, and a direction; M events only name processes and
threads; slices on one thread either nest or do not overlap. An event without tid is on the thread
whose tid is its pid (the JSON importer's rule).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

PHASES = frozenset("XBEiICsftMbenOND")
METADATA = frozenset({"process_name", "thread_name"})
EPS = 1e-6  # us: timestamps are floats


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _label(index: int, event: dict[str, Any]) -> str:
    return f"event {index} ({event.get('ph')} {event.get('name')!r})"


def _events(obj: object, problems: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """(index, event) of a JSON object or array trace, events too malformed to check left out."""
    events = obj.get("traceEvents") if isinstance(obj, dict) else obj
    if not isinstance(events, list):
        problems.append("trace has no traceEvents list")
        return []
    kept = []
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") not in PHASES:
            problems.append(f"event {index}: not an event object with a known ph")
        elif event["ph"] != "M" and not _is_number(event.get("ts")):
            problems.append(f"{_label(index, event)}: ts must be a number")
        else:
            kept.append((index, event))
    return kept


def _check_single(index: int, event: dict[str, Any], problems: list[str]) -> None:
    """Rules on one event alone: X dur, C args, M names, instant scope."""
    ph = event["ph"]
    if ph == "X" and not (_is_number(event.get("dur")) and event["dur"] >= 0):
        problems.append(f"{_label(index, event)}: X needs a non-negative numeric dur")
    elif ph == "C":
        args = event.get("args")
        if not isinstance(args, dict) or not args or not all(_is_number(v) for v in args.values()):
            problems.append(f"{_label(index, event)}: C args must be an object of numbers")
    elif ph == "M":
        args = event.get("args")
        if event.get("name") not in METADATA:
            problems.append(f"{_label(index, event)}: M events only name processes and threads")
        elif not isinstance(args, dict) or not isinstance(args.get("name"), str):
            problems.append(f"{_label(index, event)}: M needs args.name")
    elif ph in "iI" and event.get("s", "t") not in ("g", "p", "t"):
        problems.append(f"{_label(index, event)}: instant scope s must be g, p or t")


def _check_begin_end(events: list[tuple[int, dict[str, Any]]], problems: list[str]) -> None:
    """B/E pairs nest per (pid, tid): each E closes the newest open B (same name if given)."""
    stacks: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for index, event in sorted(events, key=lambda item: item[1]["ts"]):
        stack = stacks[(event.get("pid"), event.get("tid", event.get("pid")))]
        if event["ph"] == "B":
            stack.append((index, event))
        elif not stack:
            problems.append(f"{_label(index, event)}: E without an open B on its thread")
        else:
            _, begin = stack.pop()
            if "name" in event and event["name"] != begin.get("name"):
                problems.append(f"{_label(index, event)}: E closes {begin.get('name')!r}: B/E do not nest")
    for stack in stacks.values():
        problems.extend(f"{_label(index, event)}: B never closed" for index, event in stack)


def _check_flows(events: list[tuple[int, dict[str, Any]]], problems: list[str]) -> None:
    """Each flow id has one start (s), steps (t) after it and one finish (f), on a matching cat/name."""
    flows: dict[Any, dict[str, list[tuple[int, dict[str, Any]]]]] = defaultdict(lambda: defaultdict(list))
    for index, event in events:
        if "id" not in event:
            problems.append(f"{_label(index, event)}: flow event without id")
        else:
            flows[(event.get("cat"), event["id"])][event["ph"]].append((index, event))
    for (cat, flow_id), phases in flows.items():
        where = f"flow id {flow_id!r} (cat {cat!r})"
        if len(phases["s"]) != 1 or len(phases["f"]) != 1:
            problems.append(f"{where}: needs one s and one f, has {len(phases['s'])} s and {len(phases['f'])} f")
            continue
        start, finish = phases["s"][0][1], phases["f"][0][1]
        if finish["ts"] + EPS < start["ts"] or any(t["ts"] + EPS < start["ts"] for _, t in phases["t"]):
            problems.append(f"{where}: ends before it starts")


def _check_bound_flows(events: list[tuple[int, dict[str, Any]]], problems: list[str]) -> None:
    """Flow v2: each bind_id has exactly one source slice (flow_out), at least one end (flow_in) that
    does not start before the source; directions are JSON booleans (Perfetto ignores other types)."""
    flows: dict[Any, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for index, event in events:
        bind = event["bind_id"]
        if isinstance(bind, bool) or not isinstance(bind, int | str):
            problems.append(f"{_label(index, event)}: bind_id must be an integer or a string")
            continue
        out, into = event.get("flow_out", False), event.get("flow_in", False)
        if not isinstance(out, bool) or not isinstance(into, bool):
            problems.append(f"{_label(index, event)}: flow_out / flow_in must be true or false")
        elif not (out or into):
            problems.append(f"{_label(index, event)}: bind_id without flow_out or flow_in")
        elif event["ph"] not in "XB":
            problems.append(f"{_label(index, event)}: flows bind to X or B slices only")
        else:
            flows[bind]["out" if out and not into else "in" if into and not out else "step"].append(event)
    for bind, ends in flows.items():
        where = f"bind_id {bind!r}"
        if len(ends["out"]) != 1 or not ends["in"]:
            problems.append(f"{where}: needs one flow_out and a flow_in, has {len(ends['out'])} and {len(ends['in'])}")
            continue
        source = ends["out"][0]["ts"]
        if any(e["ts"] + EPS < source for e in ends["in"] + ends["step"]):
            problems.append(f"{where}: ends before it starts")


def _check_overlap(slices: list[tuple[int, dict[str, Any]]], problems: list[str]) -> None:
    """Complete slices on one (pid, tid) either nest or are disjoint."""
    tracks: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
    for index, event in slices:
        tracks[(event.get("pid"), event.get("tid", event.get("pid")))].append(
            (event["ts"], event["ts"] + event["dur"], index)
        )
    for (pid, tid), spans in tracks.items():
        open_ends: list[tuple[float, int]] = []
        for start, end, index in sorted(spans, key=lambda s: (s[0], -s[1], s[2])):
            while open_ends and open_ends[-1][0] <= start + EPS:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0] + EPS:
                other = open_ends[-1][1]
                problems.append(f"event {index} overlaps event {other} on pid {pid} tid {tid} without nesting")
            open_ends.append((end, index))


def validate_trace(obj: object) -> list[str]:
    """Problems Perfetto would have with a Chrome trace object (an empty list when it is sound)."""
    problems: list[str] = []
    events = _events(obj, problems)
    for index, event in events:
        _check_single(index, event, problems)
    _check_begin_end([(i, e) for i, e in events if e["ph"] in "BE"], problems)
    _check_flows([(i, e) for i, e in events if e["ph"] in "stf"], problems)
    _check_bound_flows([(i, e) for i, e in events if "bind_id" in e], problems)
    timed = [(i, e) for i, e in events if e["ph"] == "X" and _is_number(e.get("dur")) and e["dur"] >= 0]
    _check_overlap(timed, problems)
    return problems
