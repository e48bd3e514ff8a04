"""What the layer tests (test_layers.py) read from the source: modules, their imports, module-level
definitions. Everything is parsed with ast, nothing is imported, so imports inside functions and
under TYPE_CHECKING count too."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import cannrt

SRC = Path(cannrt.__file__).parent


def module_name(path: Path) -> str:
    """cannrt.device.npu for src/cannrt/device/npu.py, cannrt.abi for src/cannrt/abi/__init__.py."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str) -> Path | None:
    """The file of a cannrt module, None if the name is not a module (a class, a function...)."""
    relative = Path(*name.split("."))
    for candidate in (SRC.parent / relative.with_suffix(".py"), SRC.parent / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def source_id(path: Path) -> str:
    """The test id of a file: device/npu.py."""
    return path.relative_to(SRC).as_posix()


def within(name: str, prefixes: tuple[str, ...] | frozenset[str]) -> bool:
    """name is one of the modules or packages in prefixes, or inside one of those packages."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> str:
    """The layer a module belongs to: its top-level package (cannrt.memory for
    cannrt.memory.planner.api), the top-level module itself (cannrt.config), or cannrt for the
    root package's __init__."""
    return ".".join(module.split(".")[:2])


ALL_FILES = sorted(SRC.rglob("*.py"))


def layer_files(layer: str) -> list[Path]:
    """The files of one layer."""
    return [path for path in ALL_FILES if layer_of(module_name(path)) == layer]


@functools.cache
def parse(path: Path) -> ast.Module:
    """The syntax tree of a file, parsed once per test session."""
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def imports(path: Path, *, runtime_only: bool = False, module: str | None = None) -> frozenset[str]:
    """Absolute names of the modules a file imports (`from pkg import name` counts pkg.name when it
    is a module, else pkg). With runtime_only, imports under `if TYPE_CHECKING:` are skipped."""
    tree = parse(path)
    skipped: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
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
                names.add(child if module_file(child) is not None else base)
    return frozenset(name for name in names if name == "cannrt" or name.startswith("cannrt."))


def closure(start: Path) -> dict[str, list[str]]:
    """Every cannrt module reachable by imports from start, with one import chain to it. Importing a
    submodule also runs its parent packages' __init__ (except the root package's, which any import
    of cannrt runs and which re-exports the public API)."""
    seen: dict[str, list[str]] = {module_name(start): [module_name(start)]}
    todo = [start]
    while todo:
        path = todo.pop()
        chain = seen[module_name(path)]
        for name in imports(path):
            targets = [name] + [name.rsplit(".", i)[0] for i in range(1, name.count("."))]
            for target in targets:
                file = module_file(target)
                if file is None or target in seen or target == "cannrt":
                    continue
                seen[target] = [*chain, target]
                todo.append(file)
    return seen


def module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements that run at import, including those in module-level if/try blocks."""
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        yield stmt
        if isinstance(stmt, ast.If | ast.Try):
            todo[:0] = [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", [])]
            for handler in getattr(stmt, "handlers", []):
                todo[:0] = handler.body


def assigned(stmt: ast.stmt) -> list[tuple[str, ast.expr | None]]:
    """(name, value) of each plain name a statement binds by assignment."""
    if isinstance(stmt, ast.Assign):
        return [(t.id, stmt.value) for target in stmt.targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, stmt.value)]
    return []


def int_literal(node: ast.expr | None) -> int | None:
    """The value of an integer literal such as -2 or 0x40 (not of an expression like 1 << 6), else None."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None
    return value if type(value) is int else None


def definitions(path: Path) -> list[tuple[str, ast.stmt]]:
    """(name, statement) of every name a module binds at import, except by importing it."""
    found = []
    for stmt in module_level(parse(path)):
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((stmt.name, stmt))
        found.extend((name, stmt) for name, _ in assigned(stmt))
    return found


def struct_layouts(path: Path) -> list[str]:
    """file:line: statement of every struct.Struct(...) a module builds at import."""
    return [
        f"{source_id(path)}:{stmt.lineno}: {ast.unparse(stmt)[:60]}"
        for stmt in module_level(parse(path))
        if any(
            isinstance(call, ast.Call) and ast.unparse(call.func) in ("struct.Struct", "Struct")
            for _, value in assigned(stmt)
            if value is not None
            for call in ast.walk(value)
        )
    ]
