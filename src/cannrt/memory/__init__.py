"""memory layer of cannrt: caching pool, stream-ordered pools, static planner, memory timeline.

`cannrt.memory.summary()` prints a device's memory table (torch.cuda.memory_summary);
`history()` and `record_history()` give and configure its memory timeline.
"""

from cannrt.memory.summary_table import history, record_history, summary

__all__ = ["history", "record_history", "summary"]
