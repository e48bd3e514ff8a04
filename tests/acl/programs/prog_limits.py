"""Conformance: resource limits (streams, events, HBM, contexts) on a small configured device;
running out returns the documented codes and freeing makes room again."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

from _check import done, expect, ok, value

import acl

MAX_STREAMS, MAX_EVENTS, HBM = 8, 16, 64 << 20
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_NO_EVENT_RESOURCE = 207007
ACL_ERROR_RT_NO_STREAM_RESOURCE = 207008
ACL_HBM_MEM = 1
MIB = 1 << 20


def configure() -> None:
    """A small simulated device: the simulator reads CANNRT_CONFIG when acl.init starts it."""
    path = os.path.join(tempfile.mkdtemp(), "small.toml")
    with open(path, "w") as handle:
        handle.write(f"[chip]\nmax_streams = {MAX_STREAMS}\nmax_events = {MAX_EVENTS}\nhbm_bytes = {HBM}\n")
    os.environ["CANNRT_CONFIG"] = path


def exhaust(create: Callable[[], tuple[int, int]], code: int, what: str) -> list[int]:
    made: list[int] = []
    while True:
        handle, ret = create()
        if ret:
            expect((handle, ret), (0, code), f"{what}: the first failure")
            return made
        made.append(handle)
        expect(len(made) <= 4 * MAX_EVENTS, True, f"{what}: a limit exists")


def streams() -> None:
    made = exhaust(acl.rt.create_stream, ACL_ERROR_RT_NO_STREAM_RESOURCE, "streams")
    expect(len(made), MAX_STREAMS - 1, "the default stream holds one stream id")
    expect(acl.rt.create_stream_with_config(0, 0), (0, ACL_ERROR_RT_NO_STREAM_RESOURCE), "with_config too")
    expect(acl.rt.create_context(0), (0, ACL_ERROR_RT_NO_STREAM_RESOURCE), "a context needs a default stream")
    ok(acl.rt.destroy_stream(made.pop()), "destroy one")
    made.append(value(acl.rt.create_stream(), "room again"))
    for stream in made:
        ok(acl.rt.destroy_stream(stream), "destroy_stream")


def events() -> None:
    made = exhaust(acl.rt.create_event, ACL_ERROR_RT_NO_EVENT_RESOURCE, "events")
    expect(len(made), MAX_EVENTS, "event limit")
    expect(acl.rt.create_event_ex_with_flag(8), (0, ACL_ERROR_RT_NO_EVENT_RESOURCE), "ex events share the pool")
    ok(acl.rt.destroy_event(made.pop()), "destroy one")
    made.append(value(acl.rt.create_event_with_flag(1), "room again"))
    for event in made:
        ok(acl.rt.destroy_event(event), "destroy_event")


def memory() -> None:
    free_before, total = value(acl.rt.get_mem_info(ACL_HBM_MEM), "get_mem_info")
    expect(total, HBM, "configured HBM")
    made = exhaust(lambda: acl.rt.malloc(MIB, 2), ACL_ERROR_RT_MEMORY_ALLOCATION, "1 MiB blocks")
    expect(len(made) * MIB <= HBM < (len(made) + 2) * (MIB + 64 * 1024), True, f"{len(made)} MiB fit in 64 MiB")
    expect(acl.rt.malloc_physical(2 * MIB, None, 0), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "physical too")
    ok(acl.rt.free(made.pop()), "free one")
    made.append(value(acl.rt.malloc(MIB, 2), "room again"))
    for ptr in made:
        ok(acl.rt.free(ptr), "free")
    expect(value(acl.rt.get_mem_info(ACL_HBM_MEM), "get_mem_info")[0], free_before, "all memory back")


def main() -> None:
    configure()
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    streams()
    events()
    memory()
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("limits")


if __name__ == "__main__":
    main()
