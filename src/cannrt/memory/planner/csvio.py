"""MiniMalloc CSV input and output, with errors that name the offending line."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from cannrt.memory.planner.buffers import Buffer, InvalidBufferError, Packing

REQUIRED = ("id", "lower", "upper", "size")
OPTIONAL = ("alignment", "gaps", "offset")


class CsvFormatError(InvalidBufferError):
    """A MiniMalloc CSV file is malformed; `line` is 1-based (the header is line 1)."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}")
        self.source = source
        self.line = line


def read_csv(path: str | Path) -> list[Buffer]:
    """Read the buffers of a MiniMalloc CSV file (an `offset` column is ignored)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CsvFormatError(str(p), 0, f"cannot read file: {exc}") from exc
    return parse_csv(text, source=str(p))


def read_solution(path: str | Path) -> tuple[list[Buffer], list[int]]:
    """Read buffers and their `offset` column from a solved MiniMalloc CSV file."""
    p = Path(path)
    rows = _rows(p.read_text(encoding="utf-8"), str(p))
    header = rows[0][1]
    if "offset" not in header:
        raise CsvFormatError(str(p), 1, "missing column 'offset'")
    buffers = _buffers(rows, str(p))
    col = header.index("offset")
    offsets = [_int(cells, col, "offset", str(p), line) for line, cells in rows[1:]]
    return buffers, offsets


def parse_csv(text: str, source: str = "<csv>") -> list[Buffer]:
    """Parse MiniMalloc CSV text into buffers, raising CsvFormatError naming the line."""
    return _buffers(_rows(text, source), source)


def _rows(text: str, source: str) -> list[tuple[int, list[str]]]:
    """Non-blank rows with their 1-based line numbers; row 0 is the lower-cased header."""
    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text))
    for cells in reader:
        if any(c.strip() for c in cells):
            rows.append((reader.line_num, [c.strip() for c in cells]))
    if not rows:
        raise CsvFormatError(source, 1, "empty file: expected a header row")
    line, header = rows[0]
    rows[0] = (line, [h.lower() for h in header])
    missing = [c for c in REQUIRED if c not in rows[0][1]]
    if missing:
        raise CsvFormatError(source, line, f"missing column(s): {', '.join(missing)}")
    return rows


def _buffers(rows: list[tuple[int, list[str]]], source: str) -> list[Buffer]:
    """Turn data rows into buffers, checking each and the uniqueness of ids."""
    header = rows[0][1]
    cols = {name: header.index(name) for name in (*REQUIRED, "alignment") if name in header}
    seen: dict[str, int] = {}
    buffers: list[Buffer] = []
    for line, cells in rows[1:]:
        if len(cells) < len(header):
            raise CsvFormatError(source, line, f"expected {len(header)} fields, got {len(cells)}")
        ident = cells[cols["id"]]
        if not ident:
            raise CsvFormatError(source, line, "empty id")
        if ident in seen:
            raise CsvFormatError(source, line, f"duplicate id {ident!r} (first on line {seen[ident]})")
        seen[ident] = line
        values = {n: _int(cells, c, n, source, line) for n, c in cols.items() if n != "id"}
        try:
            buffers.append(Buffer(ident, **values))
        except InvalidBufferError as exc:
            raise CsvFormatError(source, line, str(exc)) from exc
    return buffers


def _int(cells: list[str], col: int, name: str, source: str, line: int) -> int:
    """Parse one integer cell or raise CsvFormatError."""
    try:
        return int(cells[col])
    except (ValueError, IndexError):
        raise CsvFormatError(source, line, f"column {name!r}: not an integer: {cells[col]!r}") from None


def format_csv(buffers: Sequence[Buffer], offsets: Iterable[int] | None = None) -> str:
    """MiniMalloc CSV text for `buffers`, with an `offset` column when offsets are given."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    has_align = any(b.alignment != 1 for b in buffers)
    header = ["id", "lower", "upper", "size"] + (["alignment"] if has_align else [])
    offs = list(offsets) if offsets is not None else None
    writer.writerow(header + (["offset"] if offs is not None else []))
    for i, b in enumerate(buffers):
        row: list[object] = [b.id, b.lower, b.upper, b.size]
        row += [b.alignment] if has_align else []
        row += [offs[i]] if offs is not None else []
        writer.writerow(row)
    return out.getvalue()


def write_solution(path: str | Path, packing: Packing) -> None:
    """Write a packing as MiniMalloc CSV with an `offset` column."""
    Path(path).write_text(format_csv(packing.buffers, packing.offsets), encoding="utf-8")


_CAPACITY_IN_NAME = re.compile(r"\.(\d+)\.csv$", re.IGNORECASE)


def capacity_from_name(path: str | Path) -> int | None:
    """The capacity a MiniMalloc file name carries (`A.1048576.csv` -> 1048576), if any."""
    m = _CAPACITY_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None
