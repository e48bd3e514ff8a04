"""The import rule of the layers (ARCHITECTURE.md): imports only point downward.

- device/ (the simulated NPU) imports nothing above the driver: not cannrt.runtime, memory, tools,
  acl, api or driver, neither directly nor through the modules it does import.
- the runtime reaches the device only through the driver: from cannrt.device it imports the shared
  hardware formats (cannrt.abi) and nothing else.

Parsed with ast, so imports inside functions and under TYPE_CHECKING count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cannrt

SRC = Path(cannrt.__file__).parent
ABOVE_DEVICE = ("cannrt.runtime", "cannrt.memory", "cannrt.tools", "cannrt.acl", "cannrt.api", "cannrt.driver")
RUNTIME_MAY_USE_FROM_DEVICE = ("cannrt.abi",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(path: Path, *, runtime_only: bool = False, module: str | None = None) -> set[str]:
    """Absolute names of the modules a file imports (`from pkg import name` counts pkg.name when it
    is a module, else pkg). With runtime_only, imports under `if TYPE_CHECKING:` are skipped."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    module = module or _module_name(path)
    package = module if _is_package(path) else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                names.add(child if _module_file(child) is not None else base)
    return {name for name in names if name == "cannrt" or name.startswith("cannrt.")}


def _module_file(name: str) -> Path | None:
    relative = Path(*name.split("."))
    for candidate in (SRC.parent / relative.with_suffix(".py"), SRC.parent / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _files(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _closure(start: Path) -> dict[str, list[str]]:
    """Every cannrt module reachable by imports from start, with one import chain to it. Importing a
    submodule also runs its parent packages' __init__ (except the root package's, which any import
    of cannrt runs and which re-exports the public API)."""
    seen: dict[str, list[str]] = {_module_name(start): [_module_name(start)]}
    todo = [start]
    while todo:
        path = todo.pop()
        chain = seen[_module_name(path)]
        for name in _imports(path):
            targets = [name] + [name.rsplit(".", i)[0] for i in range(1, name.count("."))]
            for target in targets:
                file = _module_file(target)
                if file is None or target in seen or target == "cannrt":
                    continue
                seen[target] = [*chain, target]
                todo.append(file)
    return seen


def test_the_layer_packages_exist() -> None:
    for package in ("device", "driver", "runtime", "kernels"):
        assert _files(package), package
    assert (SRC / "abi" / "__init__.py").is_file()


@pytest.mark.parametrize("path", _files("device"), ids=lambda p: p.name)
def test_no_device_module_imports_a_layer_above_it(path: Path) -> None:
    imported = _imports(path)
    assert "cannrt" not in imported, "the root package re-exports the API: import the module you need"
    assert sorted(n for n in imported if _within(n, ABOVE_DEVICE)) == []


@pytest.mark.parametrize("path", _files("device"), ids=lambda p: p.name)
def test_no_device_module_reaches_a_layer_above_it_indirectly(path: Path) -> None:
    reached = _closure(path)
    offending = {name: " -> ".join(chain) for name, chain in reached.items() if _within(name, ABOVE_DEVICE)}
    assert offending == {}


def test_the_runtime_imports_nothing_from_the_device_but_the_hardware_formats_at_run_time() -> None:
    offending = {
        f"{path.name}: {name}"
        for path in _files("runtime")
        for name in _imports(path, runtime_only=True)
        if _within(name, ("cannrt.device",)) and not _within(name, RUNTIME_MAY_USE_FROM_DEVICE)
    }
    assert offending == set()


def test_the_runtime_does_import_the_hardware_formats() -> None:
    """The rule is about a real dependency: the runtime packs descriptors itself."""
    assert any("cannrt.abi" in _imports(path) for path in _files("runtime"))


def test_the_runtime_imports_nothing_from_the_device_but_the_hardware_formats_even_for_types() -> None:
    offending = {
        f"{path.name}: {name}"
        for path in _files("runtime")
        for name in _imports(path)
        if _within(name, ("cannrt.device",)) and not _within(name, RUNTIME_MAY_USE_FROM_DEVICE)
    }
    assert offending == set()


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
    assert _imports(probe, module="cannrt.device.probe") == everything
    assert _imports(probe, module="cannrt.device.probe", runtime_only=True) == everything - {
        "cannrt.tools.exception_report"
    }
