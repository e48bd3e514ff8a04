"""pyACL parses every argument before a call does anything (PyArg_ParseTuple): a wrong Python type
raises TypeError even where another argument would fail a check first, and the outputs of a failed
call are 0."""

from __future__ import annotations

from types import ModuleType

import pytest

CALLS = [
    ("synchronize_event_with_timeout", (0, 1.5)),  # an unknown event, then a float timeout
    ("synchronize_stream_with_timeout", (-1, "x")),
    ("record_event", (0, "x")),
    ("stream_wait_event", (-1, 1.0)),
    ("set_stream_failure_mode", ("x", 7)),  # a str stream, then an unknown mode
    ("malloc", (0, 1.5)),  # size 0 is invalid, the policy is a float
]


@pytest.mark.parametrize(("name", "args"), CALLS, ids=[name for name, _ in CALLS])
def test_a_wrong_type_raises_type_error_before_any_other_check(acl: ModuleType, name: str, args: tuple) -> None:
    with pytest.raises(TypeError):
        getattr(acl.rt, name)(*args)


def test_the_same_calls_well_typed_return_codes(acl: ModuleType) -> None:
    assert acl.rt.synchronize_event_with_timeout(0, 1) != 0
    assert acl.rt.set_stream_failure_mode(0, 7) != 0
    assert acl.rt.malloc(0, 0)[1] != 0


def test_a_failed_call_returns_zero_outputs(acl: ModuleType) -> None:
    event, ret = acl.rt.create_event()
    assert ret == 0 and acl.rt.destroy_event(event) == 0
    assert acl.rt.query_event_wait_status(event) == (0, 107017)  # ACL_ERROR_RT_INVALID_HANDLE, status 0
