"""The offline model (.om): what the graph engine writes and the runtime loads (aclmdlLoadFromFile).

Like abi/ for tasks, this is the format both sides share: graph/ builds an OfflineModel, runtime/
loads one; neither imports the other.
"""

from cannrt.om.model import (
    EventRecordTask,
    EventWaitTask,
    Gear,
    IoDesc,
    KernelTask,
    MemcpyTask,
    OfflineModel,
    PlannedTensor,
    Section,
    Task,
    TensorRef,
)

__all__ = [
    "EventRecordTask",
    "EventWaitTask",
    "Gear",
    "IoDesc",
    "KernelTask",
    "MemcpyTask",
    "OfflineModel",
    "PlannedTensor",
    "Section",
    "Task",
    "TensorRef",
]
