"""The pyACL calling convention, checked over every call of the facade in-process: TypeError for
wrong argument types (and nothing else escapes), error codes instead of exceptions, outputs
before ret, ACL_ERROR_UNINITIALIZE before acl.init, handles of distinct kinds, the constants."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from acl_harness import PROGRAMS, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cannrt.acl as facade
from cannrt.acl import constants
from cannrt.acl._state import STATE
from cannrt.errors import ErrorCode

MODULES = {
    "acl": facade,
    "acl.rt": facade.rt,
    "acl.util": facade.util,
    "acl.op": facade.op,
    "acl.media": facade.media,
    "acl.prof": facade.prof,
}
NO_INIT_NEEDED = {
    "acl.rt.get_device_count",
    "acl.rt.get_run_mode",
    "acl.rt.peek_at_last_error",
    "acl.rt.get_last_error",
    "acl.rt.get_version",
    "acl.rt.get_soc_name",
    "acl.rt.get_task_id_from_exception_info",
    "acl.rt.get_stream_id_from_exception_info",
    "acl.rt.get_thread_id_from_exception_info",
    "acl.rt.get_device_id_from_exception_info",
    "acl.rt.get_error_code_from_exception_info",
}
MIB = 1 << 20
WELL_FORMED: dict[str, list[object]] = {  # arguments that pass value checks, for calls where 5 does not
    "acl.rt.launch_callback": [print, None, 1, 0],
    "acl.rt.launch_host_func": [0, print, None],
    "acl.rt.set_exception_info_callback": [print],
    "acl.rt.create_stream_with_config": [0, 0],
    "acl.rt.set_stream_failure_mode": [0, 1],
    "acl.rt.malloc_physical": [2 * MIB, None, 0],
    "acl.rt.map_mem": [2 * MIB, 2 * MIB, 0, 5, 0],
    "acl.rt.mem_get_allocation_granularity": [None, 0],
    "acl.rt.mem_pool_create": [None],
    "acl.rt.mem_set_access": [2 * MIB, 2 * MIB, {"flags": 1}],
    "acl.rt.memcpy2d": [8192, 8, 8192, 8, 8, 1, 1],
    "acl.rt.reserve_mem_address": [2 * MIB, 0, 0, 0],
}
SAFE_INTS = [-(2**63), -2, -1, 0, 1, 3, 4095, 2**64 + 4096]  # never a real address: nothing is touched


def public_calls() -> dict[str, Callable[..., Any]]:
    """Every public function of the facade, by dotted name."""
    calls: dict[str, Callable[..., Any]] = {}
    for prefix, module in MODULES.items():
        for name in getattr(module, "__all__", None) or dir(module):
            item = getattr(module, name)
            is_call = callable(item) and not isinstance(item, type | ModuleType) and not name.startswith("_")
            if is_call and getattr(item, "__module__", "").startswith("cannrt.acl"):
                calls[f"{prefix}.{name}"] = item
    return calls


CALLS = public_calls()
RT_CALLS = {name: fn for name, fn in CALLS.items() if name.startswith("acl.rt.")}


def arity(fn: Callable[..., Any]) -> int:
    return sum(p.default is inspect.Parameter.empty for p in inspect.signature(fn).parameters.values())


@pytest.fixture
def uninitialised() -> Iterator[None]:
    if STATE.initialized:
        facade.finalize()
    yield
    assert not STATE.initialized


@pytest.mark.parametrize("name", sorted(n for n, f in CALLS.items() if arity(f) > 0))
def test_wrong_argument_types_raise_type_error(name: str, acl: ModuleType) -> None:
    fn = CALLS[name]
    with pytest.raises(TypeError):
        fn(*[object()] * arity(fn))
    assert acl.rt.get_device() == (0, 0)  # still usable


@pytest.mark.parametrize("name", sorted(set(RT_CALLS) - NO_INIT_NEEDED))
def test_before_init_every_runtime_call_returns_uninitialize(name: str, uninitialised: None) -> None:
    fn = RT_CALLS[name]
    args = WELL_FORMED.get(name, [5] * arity(fn))
    result = fn(*args)
    ret = result[-1] if isinstance(result, tuple) else result
    assert ret == ErrorCode.UNINITIALIZE


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_invalid_numbers_never_raise_from_acl_rt(acl: ModuleType, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(RT_CALLS)))
    fn = RT_CALLS[name]
    args = [data.draw(st.sampled_from(SAFE_INTS)) for _ in range(arity(fn))]
    if "process_report" in name or "with_timeout" in name:
        args[-1] = 1 if 0 < args[-1] <= 4095 else args[-1]  # a real wait: keep it short
    if name in ("acl.rt.launch_callback", "acl.rt.launch_host_func", "acl.rt.set_exception_info_callback"):
        return  # their function arguments must be callables (TypeError)
    if name in ("acl.rt.malloc_physical", "acl.rt.mem_get_allocation_granularity", "acl.rt.mem_pool_create"):
        args[1 if name.endswith("physical") else 0] = None
    if name == "acl.rt.mem_set_access":
        args[2] = {"flags": 1}
    if name in ("acl.rt.reset_device", "acl.rt.reset_device_force") and args == [0]:
        return  # would drop the fixture's device
    result = fn(*args)
    ret = result[-1] if isinstance(result, tuple) else result
    assert isinstance(ret, int) or name == "acl.rt.get_soc_name"
    assert acl.rt.get_device()[1] in (0, ErrorCode.RT_CONTEXT_NULL)


def test_outputs_come_before_ret_and_calls_without_outputs_return_ret(acl: ModuleType) -> None:
    stream, ret = acl.rt.create_stream()
    assert (isinstance(stream, int), ret) == (True, 0)
    assert len(acl.rt.get_mem_info(constants.ACL_HBM_MEM)) == 3
    assert len(acl.get_version()) == 4
    assert isinstance(acl.rt.event_elapsed_time(1, 2)[0], float)
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == ErrorCode.RT_INVALID_HANDLE


def test_handles_of_different_kinds_never_collide(acl: ModuleType) -> None:
    stream, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    context, _ = acl.rt.get_context()
    assert len({stream, event, context}) == 3
    assert acl.rt.synchronize_stream(event) == ErrorCode.RT_INVALID_HANDLE
    assert acl.rt.synchronize_event(stream) == ErrorCode.RT_INVALID_HANDLE
    assert acl.rt.set_context(stream) == ErrorCode.RT_INVALID_HANDLE


def test_finalize_forgets_every_handle(acl: ModuleType) -> None:
    desc = acl.create_tensor_desc(0, [4], 2)
    attr = acl.op.create_attr()
    stream, _ = acl.rt.create_stream()
    assert acl.finalize() == 0
    assert acl.init() == 0
    assert acl.get_tensor_desc_size(desc) == 0
    assert acl.op.set_attr_int(attr, "x", 1) == ErrorCode.INVALID_PARAM
    assert acl.rt.set_device(0) == 0
    assert acl.rt.synchronize_stream(stream) == ErrorCode.RT_INVALID_HANDLE


def test_every_error_code_has_its_acl_constant() -> None:
    for code in ErrorCode:
        name = "ACL_SUCCESS" if code == ErrorCode.SUCCESS else f"ACL_ERROR_{code.name}"
        assert getattr(constants, name) == code
        assert getattr(facade, name) == code


def test_reference_constants_have_their_values() -> None:
    expected = {
        "ACL_DEVICE": 0,
        "ACL_HOST": 1,
        "ACL_MEM_MALLOC_HUGE1G_ONLY_P2P": 7,
        "ACL_MEMCPY_DEFAULT": 4,
        "ACL_HBM_MEM_NORMAL": 5,
        "ACL_EVENT_TIME_LINE": 8,
        "ACL_STREAM_FAST_SYNC": 2,
        "ACL_CALLBACK_BLOCK": 1,
        "ACL_DEV_ATTR_L2_CACHE_SIZE": 302,
        "ACL_BF16": 27,
        "ACL_FORMAT_FRACTAL_Z": 4,
        "NPY_HALF": 23,
        "ACL_AICORE_NONE": 0xFF,
        "ACL_PROF_TASK_MEMORY": 0x1000,
        "ACL_ERROR_OP_NOT_FOUND": 100024,
    }
    assert {name: getattr(constants, name) for name in expected} == expected


def documented_calls() -> set[str]:
    text = (ROOT / "docs" / "acl.md").read_text()
    return set(re.findall(r"^\| `(acl\.[\w.]+)\(", text, re.MULTILINE))


def test_docs_table_lists_every_call_and_nothing_else() -> None:
    assert documented_calls() == set(CALLS)


def test_every_call_is_exercised_by_a_conformance_program() -> None:
    sources = "\n".join(p.read_text() for p in PROGRAMS.glob("prog_*.py"))
    missing = sorted(name for name in CALLS if not re.search(re.escape(name) + r"\b", sources))
    assert not missing, f"calls no conformance program uses: {missing}"


def test_conformance_programs_are_plain_pyacl_programs() -> None:
    for path in PROGRAMS.glob("prog_*.py"):
        text = path.read_text()
        assert "import acl\n" in text and "cannrt" not in text.replace("CANNRT_CONFIG", ""), path.name
