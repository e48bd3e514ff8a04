"""The driver's resource ids: per-device pools with limits, lowest free id reused first."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cannrt import CannError
from cannrt.config import ChipSpec, Settings
from cannrt.driver.hal import Driver, Resource
from cannrt.runtime.core import Runtime


@pytest.fixture
def driver() -> Iterator[Driver]:
    drv = Driver(Settings(chip=ChipSpec(max_events=8, max_streams=6), watchdog_s=10.0))
    drv.open(0)
    drv.open(1)
    yield drv
    drv.close_all()


def test_ids_are_handed_out_from_zero_per_device_and_kind(driver: Driver) -> None:
    assert [driver.resource_alloc(0, Resource.EVENT) for _ in range(3)] == [0, 1, 2]
    assert [driver.resource_alloc(0, Resource.STREAM) for _ in range(2)] == [0, 1]
    assert driver.resource_alloc(1, Resource.EVENT) == 0  # another device has its own pool


@pytest.mark.parametrize(
    ("kind", "limit", "code"),
    [(Resource.EVENT, 8, 207007), (Resource.STREAM, 6, 207008), (Resource.SQ, 6, 207005), (Resource.CQ, 1024, 207005)],
)
def test_an_exhausted_pool_refuses_with_its_code(driver: Driver, kind: Resource, limit: int, code: int) -> None:
    ids = [driver.resource_alloc(0, kind) for _ in range(limit)]
    assert ids == list(range(limit))
    with pytest.raises(CannError) as info:
        driver.resource_alloc(0, kind)
    assert info.value.code == code
    assert f"limit {limit}" in str(info.value)


def test_freed_ids_come_back_lowest_first(driver: Driver) -> None:
    for _ in range(8):
        driver.resource_alloc(0, Resource.EVENT)
    driver.resource_free(0, Resource.EVENT, 5)
    driver.resource_free(0, Resource.EVENT, 2)
    assert driver.resource_alloc(0, Resource.EVENT) == 2
    assert driver.resource_alloc(0, Resource.EVENT) == 5
    with pytest.raises(CannError):
        driver.resource_alloc(0, Resource.EVENT)


def test_devices_that_do_not_exist_or_are_not_open_are_refused() -> None:
    drv = Driver(Settings(device_count=2, watchdog_s=10.0))
    try:
        with pytest.raises(CannError) as info:
            drv.open(2)
        assert info.value.code == 107001
        with pytest.raises(CannError) as info:
            drv.resource_alloc(1, Resource.EVENT)  # exists, not open
        assert info.value.code == 107001
        assert drv.device_count() == 2
    finally:
        drv.close_all()


def test_closing_a_device_returns_all_of_its_ids(driver: Driver) -> None:
    for _ in range(8):
        driver.resource_alloc(0, Resource.EVENT)
    driver.close(0)
    driver.open(0)
    assert driver.resource_alloc(0, Resource.EVENT) == 0


# -- the same limits seen through the runtime ------------------------------------------------------
@pytest.fixture
def small_rt(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(chip=ChipSpec(max_events=4, max_streams=4))


def test_creating_more_events_than_the_device_has_is_error_207007(small_rt: Runtime) -> None:
    ctx = small_rt.set_device(0)
    events = [ctx.create_event() for _ in range(4)]
    with pytest.raises(CannError) as info:
        ctx.create_event()
    assert info.value.code == 207007
    events[1].destroy()
    assert ctx.create_event().event_id == events[1].event_id  # a destroyed event's id is reused


def test_creating_more_streams_than_the_device_has_is_error_207008(small_rt: Runtime) -> None:
    ctx = small_rt.set_device(0)  # the default stream holds one id
    streams = [ctx.create_stream() for _ in range(3)]
    with pytest.raises(CannError) as info:
        ctx.create_stream()
    assert info.value.code == 207008
    streams[0].destroy()
    assert ctx.create_stream().stream_id == streams[0].stream_id


def test_a_reused_legacy_event_id_starts_unrecorded(small_rt: Runtime) -> None:
    ctx = small_rt.set_device(0)
    recorder, waiter = ctx.create_stream(), ctx.create_stream()
    first = ctx.create_event(0, legacy=True)
    first.record(recorder)
    recorder.synchronize(timeout_ms=10)
    first.destroy()
    second = ctx.create_event(0, legacy=True)
    assert second.event_id == first.event_id
    second.wait_on(waiter)  # must block: the old record does not belong to this event
    with pytest.raises(CannError) as info:
        waiter.synchronize(timeout_ms=1)
    assert info.value.code == 507046
    second.record(recorder)
    waiter.synchronize(timeout_ms=10)
