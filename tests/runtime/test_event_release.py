"""Events are given back once nothing names them (issue 13, item 8): record() without an event and
wait_stream hold no device event for long; a destroyed event's slot outlives the queued tasks
that name it, so a new event never takes a slot a queued wait still reads."""

from __future__ import annotations

import gc
from collections.abc import Callable

import numpy as np

from cannrt import Device
from cannrt.driver.hal import Resource
from cannrt.runtime.core import Runtime


def events_held(runtime: Runtime, device: int = 0) -> int:
    next_id, free = runtime.driver._ids.get((device, Resource.EVENT), (0, set()))
    return next_id - len(free)


def test_wait_stream_in_a_loop_holds_a_bounded_number_of_events(make_runtime: Callable[..., Runtime]) -> None:
    """More wait_stream calls than the device has events (65,535 would end in 207007 if each leaked)."""
    runtime = make_runtime()
    dev = Device(0)
    first, second = dev.stream(), dev.stream()
    for step in range(3000):
        first.launch("nop")
        second.wait_stream(first)
        if step % 500 == 0:
            second.synchronize()
    second.synchronize()
    gc.collect()
    dev.event()  # a creation reaps what was dropped
    assert events_held(runtime) <= 4


def test_a_dropped_events_slot_is_kept_while_a_queued_wait_names_it(make_runtime: Callable[..., Runtime]) -> None:
    """The wait on the dropped event stays queued behind a legacy wait; a new event created
    meanwhile gets another slot, and the first wait still completes on the dropped event's record."""
    runtime = make_runtime()
    dev = Device(0)
    producer, consumer = dev.stream(), dev.stream()
    gate = dev.legacy_event()
    producer.wait(gate)
    data = dev.array(np.zeros(16, np.float32))
    one = dev.array(np.ones(16, np.float32))
    producer.launch("add", data, one, data)
    consumer.wait_stream(producer)  # an event made and dropped here
    consumer.launch("add", data, one, data)
    gc.collect()
    held = events_held(runtime)
    fresh = dev.event()
    assert events_held(runtime) == held + 1  # the dropped one's slot was not reused
    fresh.record(consumer)
    other = dev.stream()
    other.record(gate)
    assert (data.to_numpy(consumer) == 2).all()
    gc.collect()
    dev.event()
    assert events_held(runtime) == held + 1  # the dropped one was freed once its tasks completed


def test_destroying_an_event_with_queued_waits_frees_its_slot_after_them(make_runtime: Callable[..., Runtime]) -> None:
    runtime = make_runtime()
    dev = Device(0)
    producer, consumer = dev.stream(), dev.stream()
    gate = dev.legacy_event()
    producer.wait(gate)
    event = producer.record()
    consumer.wait(event)
    held = events_held(runtime)
    event.destroy()
    assert events_held(runtime) == held
    dev.stream().record(gate)
    consumer.synchronize()
    dev.event()
    assert events_held(runtime) == held
