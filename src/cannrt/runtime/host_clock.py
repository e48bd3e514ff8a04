"""The modelled host clock: the host side of one simulated machine (the devices are told its time)."""

from __future__ import annotations


class HostClock:
    """Host time in nanoseconds: advanced by modelled API-call costs and by host waits.

    The device task schedulers commit decisions only up to `now_ns`; a submission made at host
    time H arrives at H, after every committed decision, so it never lands in the simulated past.
    """

    __slots__ = ("now_ns",)

    def __init__(self) -> None:
        self.now_ns = 0

    def move_to(self, ns: int) -> None:
        """Move forward to ns (a wait ended then); never backwards."""
        if ns > self.now_ns:
            self.now_ns = ns
