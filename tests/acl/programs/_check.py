"""Tiny assertion helpers shared by the conformance programs (like the samples' check_ret)."""

from __future__ import annotations

import sys
from typing import Any

checked = [0]


def expect(got: Any, want: Any, what: str) -> Any:
    """Exit with a FAIL line unless got == want."""
    checked[0] += 1
    if got != want:
        print(f"FAIL {what}: got {got!r}, want {want!r}")
        sys.exit(1)
    return got


def ok(ret: int, what: str) -> None:
    """A call that must succeed."""
    expect(ret, 0, what)


def value(result: tuple[Any, ...], what: str) -> Any:
    """The output of a call returning (value, ret) that must succeed."""
    *outputs, ret = result
    expect(ret, 0, what)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def done(name: str) -> None:
    """Report success."""
    print(f"PASS {name} ({checked[0]} checks)")
