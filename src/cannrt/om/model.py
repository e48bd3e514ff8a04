"""The contents of an offline model: I/O descriptions, weights, the memory plan and the task list.

GE's build order gives the parts: logical streams, then memory assignment (a weight section and one
work section holding the feature maps and the I/O blocks), then events on cross-stream edges, then the
task list. A loaded model's tasks are sent as they are, except that arguments pointing into the I/O
blocks are patched to the user's dataset buffers at execute (zero copy).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Section(enum.IntEnum):
    """Where a task argument points: the model's memory or one of the user's buffers."""

    WORK = 0  # feature maps: offset into the work block (aclmdlQuerySize's work size)
    WEIGHT = 1  # read-only weights: offset into the weight block
    INPUT = 2  # offset into the user's input buffer `index` (patched at execute)
    OUTPUT = 3  # offset into the user's output buffer `index` (patched at execute)


@dataclass(frozen=True)
class TensorRef:
    """A tensor argument of a task: section + offset, and what the kernel sees (ACL dtype, shape)."""

    section: Section
    offset: int  # bytes from the start of the section (or of the user's buffer)
    dtype: int  # ACL dtype code
    shape: tuple[int, ...]
    index: int = 0  # input / output number for Section.INPUT / OUTPUT


@dataclass(frozen=True)
class KernelTask:
    """One kernel launch (a KERNEL task): the node it comes from names it in profiles and dumps."""

    stream: int  # logical stream of the model, 0..num_streams-1
    kernel: str  # registered kernel name
    block_dim: int
    args: tuple[TensorRef | int | float, ...]  # tensors, then scalars, as the kernel takes them
    node: str  # ONNX node name (several tasks may share one after lowering)
    op_type: str  # ONNX op type as CANN writes it: "Conv", "Relu"


@dataclass(frozen=True)
class MemcpyTask:
    """An on-device copy (MEMCPY_ASYNC task), e.g. from a weight to an output buffer."""

    stream: int
    src: TensorRef
    dst: TensorRef
    nbytes: int
    node: str = ""


@dataclass(frozen=True)
class EventRecordTask:
    """EVENT_RECORD on the producer's stream of a cross-stream edge."""

    stream: int
    event: int  # model event, 0..num_events-1


@dataclass(frozen=True)
class EventWaitTask:
    """EVENT_WAIT on the consumer's stream of a cross-stream edge."""

    stream: int
    event: int


Task = KernelTask | MemcpyTask | EventRecordTask | EventWaitTask


@dataclass(frozen=True)
class IoDesc:
    """A model input or output as aclmdlGetInputDims / GetInputSizeByIndex describe it."""

    name: str
    dtype: int  # ACL dtype code
    format: int  # ACL format code (ACL_FORMAT_NCHW, ACL_FORMAT_ND...)
    shape: tuple[int, ...]  # -1 in dynamic positions (the dynamic batch dimension)
    size: int  # bytes of the largest gear: prod(dims) x itemsize exactly


@dataclass(frozen=True)
class PlannedTensor:
    """One feature map of the memory plan: where it lives and when (task indices) it is live."""

    name: str
    offset: int  # in the work section
    size: int
    first: int  # index of the first task that writes it
    last: int  # index of the last task that reads it
    stream: int


@dataclass(frozen=True)
class Gear:
    """One compiled shape of the model: a static model has one; --dynamic_batch_size one per batch."""

    batch: int  # 0 for a static model
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    tasks: tuple[Task, ...]  # in submission order
    plan: tuple[PlannedTensor, ...]
    work_size: int  # bytes of the work section this gear needs
    # the feature-map part of the plan (work_size less the I/O blocks laid out after it), beside the
    # unplanned sum of the same buffers and their lower bound (the most bytes live at one time)
    feature_map_size: int = 0
    feature_map_unplanned: int = 0
    feature_map_lower_bound: int = 0


@dataclass(frozen=True)
class OfflineModel:
    """An offline model: what `cannrt atc` writes to NAME.om."""

    name: str
    soc_version: str
    inputs: tuple[IoDesc, ...]  # a dynamic-batch model ends with "ascend_mbatch_shape_data"
    outputs: tuple[IoDesc, ...]
    weights: bytes  # the weight section, weights from offset 512, each rounded up to 512 bytes
    num_streams: int
    num_events: int
    gears: tuple[Gear, ...]
    graph: dict[str, Any] = field(default_factory=dict)  # JSON-able graph for `atc --mode=1` and tools

    @property
    def work_size(self) -> int:
        """aclmdlQuerySize's work size: the largest gear's work section."""
        return max(g.work_size for g in self.gears)

    @property
    def weight_size(self) -> int:
        """aclmdlQuerySize's weight size."""
        return len(self.weights)
