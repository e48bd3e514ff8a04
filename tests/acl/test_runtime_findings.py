"""Runtime behaviour the facade depends on (found wanting once, fixed since)."""

from __future__ import annotations

from types import ModuleType

from cannrt.errors import ErrorCode


def test_destroyed_contexts_give_their_address_space_back(acl: ModuleType) -> None:
    made: list[int] = []
    while True:
        context, ret = acl.rt.create_context(0)
        if ret:
            assert ret == ErrorCode.RT_RESOURCE_ALLOC_FAIL
            break
        made.append(context)
    for context in made:
        assert acl.rt.destroy_context(context) == 0
    assert acl.rt.create_context(0)[1] == 0
