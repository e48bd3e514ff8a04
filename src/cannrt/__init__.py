"""cannrt: the CANN runtime in Python, on a simulated Ascend-class NPU."""

from __future__ import annotations

__version__ = "0.1.0"

