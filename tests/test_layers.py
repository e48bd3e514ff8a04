"""The layer rules of cannrt (ARCHITECTURE.md "Layers"): imports only point downward.

    acl  api  cli  __main__          the facades and commands; only __main__ imports cli
    runtime  memory  tools           above the driver: they never import device/
    driver                           the only door to the device
    device                           the simulated NPU
    kernels  abi                     kernel binaries; the wire formats both sides share
    config  errors  dtypes           leaves

MAY_IMPORT says, per layer, which packages its modules may import (besides their own); RULES says
in the architecture's words what no layer may import, and every module is held to both:

 1. abi/ imports nothing of cannrt but errors and dtypes.
 2. device/ imports only abi, config, errors, dtypes and kernels: never the driver, runtime,
    memory, tools, acl, api or cli, neither directly nor through what it imports.
 3. kernels/ imports only abi, config, errors and dtypes (no device, no runtime).
 4. driver/ imports abi, config, errors, dtypes and device, nothing above itself; only the runtime
    imports the driver.
 5. Nothing above the driver (runtime, memory, tools, api, acl, cli) imports device/.
 6. runtime/ imports no api, acl or cli, and of tools only the exception report formatter;
    memory/ imports no runtime (nor anything else of the stack: it is host-side bookkeeping).
 7. tools/ do not drive the device: no driver, device or runtime; they consume abi records.
 8. api/ never imports acl/; acl/ is a facade over the runtime and takes from api/ only the dump
    and profile sessions (api.dump, api.profile).
 9. cli/ is the top: nothing imports it but cannrt/__main__.py; no module imports the root
    package cannrt (it re-exports the public API).
10. cannrt/__init__.py only re-exports: imports, __version__ and __all__, and every name in
    __all__ is importable from cannrt.
11. Wire constants are defined once, in abi/: no module outside it defines a name of
    cannrt.abi.__all__ or gives one a second name, repeats an abi constant under a lookalike name
    or an abi enum's members in a class of its own; device/, driver/ and runtime/ build no
    struct.Struct layout.
12. Nothing outside the driver and the device touches device objects: no attribute access named
    like one of their parts (.timeline, .executor, .hbm, ._npu...).

Imports inside functions and under TYPE_CHECKING count (a type-only import is still a dependency).
"""

from __future__ import annotations

import ast
import enum
from pathlib import Path
from typing import NamedTuple

import pytest

import cannrt
import cannrt.abi
from layers_imports import (
    ALL_FILES,
    SRC,
    assigned,
    closure,
    definitions,
    imports,
    int_literal,
    layer_files,
    layer_of,
    module_level,
    module_name,
    parse,
    source_id,
    struct_layouts,
    within,
)

BASE = ("cannrt.abi", "cannrt.config", "cannrt.errors", "cannrt.dtypes")
# What the facades (api, acl, cli) build on.
HOST_STACK = (*BASE, "cannrt.kernels", "cannrt.runtime", "cannrt.memory", "cannrt.tools")
ABOVE_THE_DRIVER = ("cannrt.runtime", "cannrt.memory", "cannrt.tools", "cannrt.api", "cannrt.acl", "cannrt.cli")

# Which cannrt packages and modules each layer's modules may import, besides their own layer.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "cannrt.config": (),
    "cannrt.errors": (),
    "cannrt.dtypes": (),
    "cannrt.abi": ("cannrt.errors", "cannrt.dtypes"),
    "cannrt.kernels": BASE,
    "cannrt.device": (*BASE, "cannrt.kernels"),  # device/code.py loads the kernel binaries
    "cannrt.driver": (*BASE, "cannrt.device"),
    "cannrt.memory": BASE,
    "cannrt.om": BASE,  # the offline-model format: the graph engine writes it, the runtime loads it
    "cannrt.graph": (*BASE, "cannrt.kernels", "cannrt.memory", "cannrt.om"),
    "cannrt.tools": (*BASE, "cannrt.kernels"),  # tools/reference.py runs the kernels' numpy code as the bench
    "cannrt.runtime": (
        *BASE,
        "cannrt.kernels",
        "cannrt.driver",
        "cannrt.memory",
        "cannrt.om",  # model load/execute reads the offline model
        # The one named exception to "the runtime imports no tools": runtime/context.py formats the
        # CANN error report of a device fault with this pure function of the abi ExceptionRecord.
        "cannrt.tools.exception_report",
        "cannrt.tools.allocations",  # Context.allocations names user allocations in that report
        "cannrt.tools.dump",  # the exception dump a fault writes outside a dump session, as CANN's runtime does
    ),
    "cannrt.api": (*HOST_STACK, "cannrt.om", "cannrt.graph"),  # Model.load compiles an .onnx on the fly
    "cannrt.onnx_backend": (*HOST_STACK, "cannrt.om", "cannrt.graph", "cannrt.api"),  # onnx.backend over cannrt
    "cannrt.acl": (*HOST_STACK, "cannrt.om", "cannrt.api.dump", "cannrt.api.profile"),  # dump and profile sessions
    "cannrt.cli": (*HOST_STACK, "cannrt.om", "cannrt.graph", "cannrt.api", "cannrt.acl"),  # atc compiles models
    "cannrt": (*BASE, "cannrt.kernels", "cannrt.runtime", "cannrt.memory", "cannrt.api"),  # __init__.py
    "cannrt.__main__": ("cannrt.cli",),
}


class Rule(NamedTuple):
    """The layers' modules import nothing within must_not_import but what is within unless."""

    layers: tuple[str, ...]
    must_not_import: tuple[str, ...]
    unless: tuple[str, ...] = ()


EVERY_LAYER = tuple(MAY_IMPORT)
RULES: dict[str, Rule] = {
    "abi-imports-nothing-but-errors-and-dtypes": Rule(("cannrt.abi",), ("cannrt",), ("cannrt.errors", "cannrt.dtypes")),
    "device-imports-nothing-above-it": Rule(("cannrt.device",), ("cannrt.driver", *ABOVE_THE_DRIVER)),
    "kernels-import-only-abi-config-errors-dtypes": Rule(("cannrt.kernels",), ("cannrt",), BASE),
    "driver-imports-nothing-above-it": Rule(("cannrt.driver",), ABOVE_THE_DRIVER),
    "only-the-runtime-imports-the-driver": Rule(
        tuple(layer for layer in EVERY_LAYER if layer not in ("cannrt.runtime", "cannrt.driver")), ("cannrt.driver",)
    ),
    "nothing-above-the-driver-imports-device": Rule(
        (*ABOVE_THE_DRIVER, "cannrt", "cannrt.__main__"), ("cannrt.device",)
    ),
    "runtime-imports-no-api-acl-cli-or-tools-but-the-exception-report": Rule(
        ("cannrt.runtime",),
        ("cannrt.api", "cannrt.acl", "cannrt.cli", "cannrt.tools"),
        ("cannrt.tools.exception_report", "cannrt.tools.allocations", "cannrt.tools.dump"),
    ),
    "memory-imports-no-runtime": Rule(
        ("cannrt.memory",),
        ("cannrt.runtime", "cannrt.driver", "cannrt.device", "cannrt.tools", "cannrt.api", "cannrt.acl", "cannrt.cli"),
    ),
    "tools-do-not-drive-the-device": Rule(("cannrt.tools",), ("cannrt.driver", "cannrt.device", "cannrt.runtime")),
    "api-imports-no-acl": Rule(("cannrt.api",), ("cannrt.acl",)),
    "acl-takes-only-the-dump-and-profile-sessions-from-api": Rule(
        ("cannrt.acl",), ("cannrt.api",), ("cannrt.api.dump", "cannrt.api.profile")
    ),
    "only-__main__-imports-cli": Rule(
        tuple(layer for layer in EVERY_LAYER if layer != "cannrt.__main__"), ("cannrt.cli",)
    ),
}

# Layers that must stay inside their row through everything they import, not only directly (the
# driver's row holds the device, so the layers above it reach the device through it by design).
SELF_CONTAINED = ("cannrt.abi", "cannrt.kernels", "cannrt.device", "cannrt.memory", "cannrt.tools")


def _imports_outside(layer: str) -> dict[str, set[str]]:
    """{module of the layer: the cannrt modules of other layers it imports}."""
    return {module_name(p): {n for n in imports(p) if layer_of(n) != layer} for p in layer_files(layer)}


# -- the table covers the package ------------------------------------------------------------------


def test_every_module_belongs_to_a_layer_of_the_table() -> None:
    assert sorted({layer_of(module_name(p)) for p in ALL_FILES} - set(MAY_IMPORT)) == []


@pytest.mark.parametrize("layer", MAY_IMPORT)
def test_every_layer_of_the_table_has_modules(layer: str) -> None:
    assert layer_files(layer), layer


# -- rules 1 to 9: imports ----------------------------------------------------------------------------


@pytest.mark.parametrize("layer", MAY_IMPORT)
def test_a_layer_imports_only_what_its_row_allows(layer: str) -> None:
    """{module: its imports from other layers that MAY_IMPORT does not grant} is empty."""
    offending = {
        module: sorted(n for n in names if not within(n, MAY_IMPORT[layer]))
        for module, names in _imports_outside(layer).items()
    }
    assert {m: names for m, names in offending.items() if names} == {}


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_no_layer_imports_what_a_rule_forbids(rule: Rule) -> None:
    """{module: its imports from other layers that the rule forbids} is empty."""
    offending = {
        module: sorted(n for n in names if within(n, rule.must_not_import) and not within(n, rule.unless))
        for layer in rule.layers
        for module, names in _imports_outside(layer).items()
    }
    assert {m: names for m, names in offending.items() if names} == {}


@pytest.mark.parametrize("path", [p for layer in SELF_CONTAINED for p in layer_files(layer)], ids=source_id)
def test_the_self_contained_layers_stay_in_their_row_through_everything_they_import(path: Path) -> None:
    """{first module reached outside the row: the import chain to it} is empty."""
    layer = layer_of(module_name(path))
    allowed = (layer, *MAY_IMPORT[layer])
    offending = {
        name: " -> ".join(chain)
        for name, chain in closure(path).items()
        if not within(name, allowed) and all(within(step, allowed) for step in chain[:-1])
    }
    assert offending == {}


def test_no_module_imports_the_root_package() -> None:
    """cannrt/__init__.py re-exports the API built on everything: importing it from below is a cycle."""
    assert sorted(module_name(p) for p in ALL_FILES if "cannrt" in imports(p)) == []


def test_the_runtime_does_import_the_wire_formats_and_the_driver() -> None:
    """The rules are about real dependencies: the runtime packs descriptors and submits them itself."""
    assert {"cannrt.abi", "cannrt.driver"} <= {layer_of(n) for p in layer_files("cannrt.runtime") for n in imports(p)}


def test_the_import_parser_sees_relative_type_checking_and_function_level_imports(tmp_path: Path) -> None:
    """A self-test of the checker on a module that hides imports in every place it looks."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import memory\n"
        "from ..runtime import core\n"
        "if TYPE_CHECKING:\n"
        "    from cannrt.tools.exception_report import format_exception_record\n"
        "def f():\n"
        "    import cannrt.driver.hal\n"
    )
    everything = {"cannrt.device.memory", "cannrt.runtime.core", "cannrt.tools.exception_report", "cannrt.driver.hal"}
    assert imports(probe, module="cannrt.device.probe") == everything
    assert imports(probe, module="cannrt.device.probe", runtime_only=True) == everything - {
        "cannrt.tools.exception_report"
    }


# -- rule 10: the root package only re-exports ---------------------------------------------------------

ROOT = SRC / "__init__.py"


def _is_reexport(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
        return True  # the docstring
    names = [name for name, _ in assigned(stmt)]
    return bool(names) and set(names) <= {"__version__", "__all__"}


def test_the_root_package_only_imports_and_names_its_version_and_exports() -> None:
    body = parse(ROOT).body
    assert [f"line {stmt.lineno}: {ast.unparse(stmt)[:60]}" for stmt in body if not _is_reexport(stmt)] == []


def test_the_root_package_exports_exactly_what_it_imports() -> None:
    imported = {
        alias.asname or alias.name
        for stmt in parse(ROOT).body
        if isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__"
        for alias in stmt.names
    }
    assert sorted(set(cannrt.__all__) ^ (imported | {"__version__"})) == []


@pytest.mark.parametrize("name", cannrt.__all__)
def test_every_exported_name_is_importable_from_cannrt(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from cannrt import {name}", namespace)
    assert namespace[name] is getattr(cannrt, name)


# -- rule 11: wire constants are defined once, in abi/ ---------------------------------------------------

WIRE_NAMES = frozenset(cannrt.abi.__all__)
WIRE_INTS = {n: v for n in cannrt.abi.__all__ if type(v := getattr(cannrt.abi, n)) is int}
WIRE_ENUMS = {
    n: {m.name: m.value for m in v}
    for n in cannrt.abi.__all__
    if isinstance(v := getattr(cannrt.abi, n), type) and issubclass(v, enum.Enum)
}
GENERIC_WORDS = frozenset({"", "AT", "BYTES", "MASK", "MAX"})  # words too common to tie two constants together
OUTSIDE_ABI = [p for p in ALL_FILES if layer_of(module_name(p)) != "cannrt.abi"]


def _words(name: str) -> frozenset[str]:
    return frozenset(name.upper().split("_")) - GENERIC_WORDS


def test_abi_exports_the_wire_constants_layouts_and_enums() -> None:
    """The checks below take their names from cannrt.abi.__all__: make sure it holds the wire."""
    constants = "SQE_BYTES TASK_ID_AT TASK_ID_BYTES WR_CQE DUMP CQE_DISCARDED MAX_PARAM_BYTES RECORD_MEMSET"
    layouts = "KERNEL_SQE EVENT_SQE SDMA_SQE CALLBACK_SQE CQE ARG_TENSOR ARG_INT ARG_FLOAT"
    assert sorted({*constants.split(), *layouts.split()} - WIRE_NAMES) == []
    enums = "SqeType CoreKind EventMode SdmaOp CopyKind DumpMode ErrorType"
    assert sorted(set(enums.split()) - set(WIRE_ENUMS)) == []


def test_no_module_outside_abi_defines_a_name_of_the_wire() -> None:
    offending = [
        f"{source_id(p)}:{stmt.lineno}: {name}"
        for p in OUTSIDE_ABI
        for name, stmt in definitions(p)
        if name in WIRE_NAMES
    ]
    assert offending == []


def test_no_module_outside_abi_gives_a_wire_name_a_second_name() -> None:
    offending = [
        f"{source_id(p)}:{stmt.lineno}: {name} = {ast.unparse(value)}"
        for p in OUTSIDE_ABI
        for stmt in module_level(parse(p))
        for name, value in assigned(stmt)
        if isinstance(value, ast.Name | ast.Attribute) and ast.unparse(value).rpartition(".")[2] in WIRE_NAMES
    ]
    assert offending == []


def test_no_module_outside_abi_repeats_a_wire_constant_under_a_lookalike_name() -> None:
    """Same value and a distinctive word in common (MEMSET_KIND = -2 next to RECORD_MEMSET = -2)."""
    offending = [
        f"{source_id(p)}:{stmt.lineno}: {name} = {value} (abi.{wire})"
        for p in OUTSIDE_ABI
        for stmt in module_level(parse(p))
        for name, node in assigned(stmt)
        if (value := int_literal(node)) is not None
        for wire, wire_value in WIRE_INTS.items()
        if value == wire_value and _words(name) & _words(wire)
    ]
    assert offending == []


def test_no_class_outside_abi_repeats_the_members_of_a_wire_enum() -> None:
    """Two or more members with the names and values of an abi enum's (a MemcpyKind beside CopyKind)."""
    offending = []
    for p in OUTSIDE_ABI:
        for stmt in module_level(parse(p)):
            if not isinstance(stmt, ast.ClassDef):
                continue
            members = {name: int_literal(node) for s in stmt.body for name, node in assigned(s)}
            for wire, wire_members in WIRE_ENUMS.items():
                same = sorted(n for n, v in wire_members.items() if v is not None and members.get(n) == v)
                if len(same) >= 2:
                    offending.append(f"{source_id(p)}:{stmt.lineno}: class {stmt.name} repeats abi.{wire} {same}")
    assert offending == []


@pytest.mark.parametrize("layer", ["cannrt.device", "cannrt.driver", "cannrt.runtime"])
def test_struct_layouts_belong_to_abi(layer: str) -> None:
    assert [line for p in layer_files(layer) for line in struct_layouts(p)] == []


def test_the_struct_layout_check_sees_the_layouts_of_abi() -> None:
    assert any(struct_layouts(p) for p in layer_files("cannrt.abi"))


# -- rule 12: nothing outside the driver and the device touches device objects ---------------------------

# Attribute names of the device's parts and of the driver's handles on them (a cheap heuristic).
DEVICE_ATTRIBUTES = frozenset(
    {"timeline", "executor", "fetcher", "hbm", "npu", "sqs", "fabric", "_devices", "_npu", "_rings", "_spaces"}
)
# (module, attribute) pairs that are not device objects, each with the reason.
NOT_DEVICE_OBJECTS = {
    ("cannrt.tools.compare", "npu"): "CompareRow.npu: the NPU side of a dump comparison (a DumpedTensor)",
}


def _device_attribute_uses(path: Path) -> list[str]:
    module = module_name(path)
    return [
        f"{source_id(path)}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(parse(path))
        if isinstance(node, ast.Attribute)
        and node.attr in DEVICE_ATTRIBUTES
        and (module, node.attr) not in NOT_DEVICE_OBJECTS
    ]


@pytest.mark.parametrize("layer", [layer for layer in MAY_IMPORT if layer not in ("cannrt.driver", "cannrt.device")])
def test_no_layer_but_the_driver_and_the_device_touches_device_objects(layer: str) -> None:
    assert [use for p in layer_files(layer) for use in _device_attribute_uses(p)] == []


@pytest.mark.parametrize("exemption", NOT_DEVICE_OBJECTS, ids=lambda e: f"{e[0]}.{e[1]}")
def test_every_exemption_from_the_device_attribute_check_is_still_needed(exemption: tuple[str, str]) -> None:
    module, attribute = exemption
    path = next(p for p in ALL_FILES if module_name(p) == module)
    assert any(isinstance(n, ast.Attribute) and n.attr == attribute for n in ast.walk(parse(path)))


def test_the_device_attribute_check_sees_the_driver_reaching_its_devices() -> None:
    assert any(_device_attribute_uses(p) for p in layer_files("cannrt.driver"))
