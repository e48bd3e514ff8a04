"""MiniMalloc CSV input and output: errors name the line, solutions round-trip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cannrt.memory.planner import Buffer, CsvFormatError, Packing, parse_csv, read_csv
from cannrt.memory.planner.csvio import (
    capacity_from_name,
    format_csv,
    read_solution,
    write_solution,
)

HEADER = "id,lower,upper,size\n"


def test_reads_the_minimalloc_columns() -> None:
    assert parse_csv(HEADER + "0,0,10,64\nb,3,4,8\n") == [
        Buffer("0", 0, 10, 64),
        Buffer("b", 3, 4, 8),
    ]


def test_columns_may_come_in_any_order_and_alignment_is_optional() -> None:
    text = "size,upper,alignment,id,lower\n64,10,16,x,2\n"
    assert parse_csv(text) == [Buffer("x", 2, 10, 64, alignment=16)]


def test_blank_lines_are_skipped() -> None:
    assert len(parse_csv(HEADER + "\n0,0,1,1\n\n")) == 1


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("0,0,1,1\n1,0,x,2\n", 3, "column 'upper': not an integer: 'x'"),
        ("0,0,1,1.5\n", 2, "column 'size': not an integer"),
        ("0,0,1,-4\n", 2, "negative size -4"),
        ("0,5,5,4\n", 2, "lower 5 >= upper 5"),
        ("0,6,5,4\n", 2, "lower 6 >= upper 5"),
        ("a,0,1,1\nb,0,1,1\na,2,3,1\n", 4, "duplicate id 'a' (first on line 2)"),
        ("0,0,1\n", 2, "expected 4 fields, got 3"),
        (",0,1,1\n", 2, "empty id"),
    ],
)
def test_bad_rows_raise_an_error_naming_the_line(body: str, line: int, message: str) -> None:
    with pytest.raises(CsvFormatError, match=f"<csv>:{line}: .*{re.escape(message)}") as info:
        parse_csv(HEADER + body)
    assert info.value.line == line


def test_missing_columns_are_named() -> None:
    with pytest.raises(CsvFormatError, match=r"<csv>:1: missing column.*upper, size"):
        parse_csv("id,lower\n0,1\n")


def test_an_empty_file_is_an_error() -> None:
    with pytest.raises(CsvFormatError, match="empty file"):
        parse_csv("")


def test_a_missing_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(CsvFormatError, match="cannot read file"):
        read_csv(tmp_path / "absent.csv")


def test_solutions_round_trip_with_an_offset_column(tmp_path: Path) -> None:
    buffers = (Buffer("a", 0, 4, 8), Buffer("b", 2, 6, 8, alignment=8))
    path = tmp_path / "sol.csv"
    write_solution(path, Packing(buffers, (0, 8)))
    assert path.read_text().splitlines()[0] == "id,lower,upper,size,alignment,offset"
    assert read_solution(path) == (list(buffers), [0, 8])
    assert read_csv(path) == list(buffers)


def test_plain_problems_are_written_without_optional_columns() -> None:
    assert format_csv([Buffer("a", 0, 1, 2)]) == HEADER + "a,0,1,2\n"


@pytest.mark.parametrize(
    ("name", "capacity"),
    [("A.1048576.csv", 1048576), ("dir.7/x.12.CSV", 12), ("resnet50.csv", None), ("a.b.csv", None)],
)
def test_capacity_is_read_from_minimalloc_file_names(name: str, capacity: int | None) -> None:
    assert capacity_from_name(name) == capacity
