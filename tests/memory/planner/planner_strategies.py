"""Hypothesis strategies shared by the planner tests."""

from __future__ import annotations

from hypothesis import strategies as st

from cannrt.memory.planner import Buffer


@st.composite
def buffer_lists(draw: st.DrawFn, max_buffers: int = 24, aligned: bool = True) -> list[Buffer]:
    """Small random problems: short lifetimes on a short timeline, sizes up to 64."""
    n = draw(st.integers(0, max_buffers))
    out: list[Buffer] = []
    for i in range(n):
        lower = draw(st.integers(0, 20))
        length = draw(st.integers(1, 10))
        size = draw(st.integers(0, 64))
        align = draw(st.sampled_from([1, 2, 4, 8])) if aligned else 1
        out.append(Buffer(str(i), lower, lower + length, size, align))
    return out
