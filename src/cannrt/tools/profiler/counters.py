"""Counter tracks of the trace (busy cores, HBM bandwidth) built while tasks stream by in start order.

Each interval adds its values while it is open. Boundaries before the start of the task being added
are final and become points. A track over a span of at most `points` microseconds gets a point at
every change (exact steps); a longer one gets the time-weighted mean of each of `points` equal bins,
so a track never holds more than `points` points, however many tasks the profile has.
"""

from __future__ import annotations

import heapq
from typing import Any

BINNED_FROM_NS = 1000  # bins of 1 us or wider are averaged; below that every change is a point


class CounterTrack:
    """One counter track ("ph": "C") of one process."""

    def __init__(self, name: str, pid: int, span: tuple[int, int], points: int) -> None:
        self.name, self.pid = name, pid
        self.origin = span[0]
        width = (span[1] - span[0]) / points if span[1] > span[0] and points > 0 else 0.0
        self.width = width if width >= BINNED_FROM_NS else 0.0
        self.keys: list[str] = []
        self.level: dict[str, float] = {}
        self._times: list[int] = []  # heap of pending boundary times
        self._deltas: dict[int, dict[str, float]] = {}
        self.events: list[dict[str, Any]] = []
        # binned mode: the bin being filled, its integral of each key, and where it was last updated
        self._bin, self._integral, self._last_ns = 0, dict[str, float](), float(span[0])
        self._emitted: dict[str, float] | None = None

    def span(self, start: int, end: int, values: dict[str, float]) -> None:
        """An interval adding values to the counter from start to end."""
        for key, value in values.items():
            self.span_one(start, end, key, value)

    def span_one(self, start: int, end: int, key: str, value: float) -> None:
        """An interval adding value to one key of the counter (as `span` with one value)."""
        if end <= start:
            return
        if key not in self.level:
            self.keys.append(key)
            self.level[key] = 0.0
            self._integral[key] = 0.0
        known, times = self._deltas, self._times
        for time, change in ((start, value), (end, -value)):
            deltas = known.get(time)
            if deltas is None:
                known[time] = {key: change}
                heapq.heappush(times, time)
            else:
                deltas[key] = deltas.get(key, 0.0) + change

    def flush_before(self, time_ns: int) -> None:
        """Turn the boundaries before time_ns into points (no later interval starts before it)."""
        times, deltas = self._times, self._deltas
        while times and times[0] < time_ns:
            time = heapq.heappop(times)
            self._advance(time)
            for key, delta in deltas.pop(time).items():
                self.level[key] += delta
            if not self.width:
                self._point(time, self.level)

    def _advance(self, time: int) -> None:
        """Binned mode: close the bins that end before time, then integrate up to it."""
        if not self.width:
            return
        while time >= self.origin + (self._bin + 1) * self.width:
            end = self.origin + (self._bin + 1) * self.width
            self._integrate(end)
            mean = {key: self._integral[key] / self.width for key in self.keys}
            if mean != self._emitted:
                self._point(self.origin + self._bin * self.width, mean)
                self._emitted = mean
            self._integral = dict.fromkeys(self.keys, 0.0)
            self._bin += 1
        self._integrate(time)

    def _integrate(self, until: float) -> None:
        elapsed = until - self._last_ns
        for key in self.keys:
            self._integral[key] += self.level[key] * elapsed
        self._last_ns = until

    def _point(self, time: float, values: dict[str, float]) -> None:
        args = {key: (round(v, 6) if abs(v) > 1e-9 else 0.0) for key, v in values.items()}
        self.events.append(
            {"ph": "C", "name": self.name, "pid": self.pid, "tid": 0, "ts": round(time / 1000, 6), "args": args}
        )

    def finish(self) -> list[dict[str, Any]]:
        """Every point (the boundaries still pending included)."""
        if self._times:
            last = max(self._times)
            self.flush_before(last + 1)
            if self.width:
                self._advance(int(self.origin + (self._bin + 1) * self.width) + 1)
        return self.events
