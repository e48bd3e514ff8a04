"""The JSON-able form of an OfflineModel's parts (the MODEL_DEF, TASK_INFO and TBE_KERNELS sections).

Each decoder checks what it reads and raises ValueError (format.py turns it into OmFormatError), so a
file whose checksums match but whose contents are inconsistent (a task on a stream the model does not
have, a tensor outside its section) is refused at load instead of faulting on the device.
"""

from __future__ import annotations

import math
from typing import Any

from cannrt.dtypes import numpy_dtype
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


def as_int(value: Any, what: str, low: int = 0) -> int:
    if type(value) is not int or value < low:
        raise ValueError(f"{what}: expected an integer >= {low}, got {value!r}")
    return value


def as_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a string, got {value!r}")
    return value


def as_shape(value: Any, what: str, low: int = 0) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected a list of dims, got {value!r}")
    return tuple(as_int(d, what, low) for d in value)


def as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected a list, got {type(value).__name__}")
    return value


def encode_ref(ref: TensorRef) -> dict[str, Any]:
    return {"s": int(ref.section), "o": ref.offset, "d": ref.dtype, "sh": list(ref.shape), "i": ref.index}


def decode_ref(obj: Any) -> TensorRef:
    if not isinstance(obj, dict):
        raise ValueError(f"tensor argument: expected an object, got {obj!r}")
    section = as_int(obj["s"], "tensor section")
    if section not in Section._value2member_map_:
        raise ValueError(f"tensor section {section} is not one of {[int(s) for s in Section]}")
    return TensorRef(
        Section(section),
        as_int(obj["o"], "tensor offset"),
        as_int(obj["d"], "tensor dtype"),
        as_shape(obj["sh"], "tensor shape"),
        as_int(obj["i"], "tensor index"),
    )


def _encode_scalar(value: int | float) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return {"f": repr(value)}  # nan, inf, -inf: JSON has no literal for them
    return value


def _decode_arg(obj: Any) -> TensorRef | int | float:
    if isinstance(obj, dict):
        if "f" in obj:
            return float(as_str(obj["f"], "scalar"))
        return decode_ref(obj)
    if isinstance(obj, bool) or not isinstance(obj, int | float):
        raise ValueError(f"task argument: expected a tensor or a number, got {obj!r}")
    return obj


def encode_task(task: Task, kernel_index: dict[str, int]) -> dict[str, Any]:
    """A task as an object; a kernel task names its kernel by its index in the TBE_KERNELS table."""
    if isinstance(task, KernelTask):
        args = [encode_ref(a) if isinstance(a, TensorRef) else _encode_scalar(a) for a in task.args]
        return {
            "k": "kernel",
            "st": task.stream,
            "kn": kernel_index[task.kernel],
            "bd": task.block_dim,
            "a": args,
            "n": task.node,
            "op": task.op_type,
        }
    if isinstance(task, MemcpyTask):
        return {
            "k": "memcpy",
            "st": task.stream,
            "src": encode_ref(task.src),
            "dst": encode_ref(task.dst),
            "nb": task.nbytes,
            "n": task.node,
        }
    kind = "record" if isinstance(task, EventRecordTask) else "wait"
    return {"k": kind, "st": task.stream, "ev": task.event}


def decode_task(obj: Any, kernels: list[str]) -> Task:
    if not isinstance(obj, dict):
        raise ValueError(f"task: expected an object, got {obj!r}")
    kind = obj["k"]
    stream = as_int(obj["st"], "task stream")
    if kind == "kernel":
        index = as_int(obj["kn"], "kernel index")
        if index >= len(kernels):
            raise ValueError(f"kernel index {index} outside the kernel table of {len(kernels)}")
        args = tuple(_decode_arg(a) for a in as_list(obj["a"], "kernel arguments"))
        node, op_type = as_str(obj["n"], "node name"), as_str(obj["op"], "op type")
        return KernelTask(stream, kernels[index], as_int(obj["bd"], "block_dim", 1), args, node, op_type)
    if kind == "memcpy":
        src, dst = decode_ref(obj["src"]), decode_ref(obj["dst"])
        return MemcpyTask(stream, src, dst, as_int(obj["nb"], "memcpy bytes"), as_str(obj["n"], "node name"))
    if kind in ("record", "wait"):
        event = as_int(obj["ev"], "event")
        return EventRecordTask(stream, event) if kind == "record" else EventWaitTask(stream, event)
    raise ValueError(f"unknown task kind {kind!r}")


def encode_io(io: IoDesc) -> dict[str, Any]:
    return {"name": io.name, "dtype": io.dtype, "format": io.format, "shape": list(io.shape), "size": io.size}


def decode_io(obj: Any) -> IoDesc:
    """An I/O description; ValueError for a type code cannrt.dtypes does not know (a foreign model)."""
    dtype = as_int(obj["dtype"], "I/O dtype")
    try:
        numpy_dtype(dtype)
    except ValueError:
        raise ValueError(f"I/O {obj['name']!r}: unknown tensor type code {dtype}") from None
    return IoDesc(
        as_str(obj["name"], "I/O name"),
        dtype,
        as_int(obj["format"], "I/O format"),
        as_shape(obj["shape"], "I/O shape", low=-1),
        as_int(obj["size"], "I/O size"),
    )


def encode_gear(gear: Gear) -> dict[str, Any]:
    """A gear without its tasks (they go to TASK_INFO)."""
    return {
        "batch": gear.batch,
        "input_shapes": [list(s) for s in gear.input_shapes],
        "output_shapes": [list(s) for s in gear.output_shapes],
        "plan": [[t.name, t.offset, t.size, t.first, t.last, t.stream] for t in gear.plan],
        "work_size": gear.work_size,
        "feature_maps": [gear.feature_map_size, gear.feature_map_unplanned, gear.feature_map_lower_bound],
    }


def decode_gear(obj: Any, tasks: tuple[Task, ...]) -> Gear:
    feature_maps = as_list(obj.get("feature_maps", [0, 0, 0]), "gear feature-map bytes")
    if len(feature_maps) != 3:
        raise ValueError(f"gear feature-map bytes {feature_maps!r}: expected 3 numbers")
    plan = []
    for row in as_list(obj["plan"], "memory plan"):
        name, *numbers = as_list(row, "planned tensor")
        if len(numbers) != 5:
            raise ValueError(f"planned tensor {row!r}: expected 6 fields")
        offset, size, first, last, stream = (as_int(n, "planned tensor field") for n in numbers)
        plan.append(PlannedTensor(as_str(name, "tensor name"), offset, size, first, last, stream))
    return Gear(
        as_int(obj["batch"], "gear batch"),
        tuple(as_shape(s, "gear input shape") for s in as_list(obj["input_shapes"], "gear input shapes")),
        tuple(as_shape(s, "gear output shape") for s in as_list(obj["output_shapes"], "gear output shapes")),
        tasks,
        tuple(plan),
        as_int(obj["work_size"], "gear work size"),
        *(as_int(n, "gear feature-map bytes") for n in feature_maps),
    )


def check_model(model: OfflineModel) -> None:
    """ValueError unless every task stays inside the model's streams, events and sections."""
    if not model.gears:
        raise ValueError("the model has no gear")
    for g, gear in enumerate(model.gears):
        if len(gear.input_shapes) != len(model.inputs) or len(gear.output_shapes) != len(model.outputs):
            raise ValueError(f"gear {g}: {len(gear.input_shapes)} inputs / {len(gear.output_shapes)} outputs")
        for t, task in enumerate(gear.tasks):
            where = f"gear {g} task {t}"
            if task.stream >= model.num_streams:
                raise ValueError(f"{where}: stream {task.stream} of {model.num_streams}")
            if isinstance(task, EventRecordTask | EventWaitTask) and task.event >= model.num_events:
                raise ValueError(f"{where}: event {task.event} of {model.num_events}")
            refs: tuple[Any, ...] = ()
            if isinstance(task, KernelTask):
                refs = task.args
            elif isinstance(task, MemcpyTask):
                refs = (task.src, task.dst)
                for ref in refs:
                    if task.nbytes > math.prod(ref.shape) * numpy_dtype(ref.dtype).itemsize:
                        raise ValueError(f"{where}: memcpy of {task.nbytes} bytes beyond a {ref.shape} tensor")
            for ref in refs:
                if isinstance(ref, TensorRef):
                    _check_ref(model, gear, ref, where)
        for p in gear.plan:
            if p.offset + p.size > gear.work_size:
                raise ValueError(f"gear {g}: tensor {p.name!r} at {p.offset}+{p.size} > work {gear.work_size}")


def _check_ref(model: OfflineModel, gear: Gear, ref: TensorRef, where: str) -> None:
    if ref.section == Section.WORK:
        limit = gear.work_size
    elif ref.section == Section.WEIGHT:
        limit = len(model.weights)
    else:
        ios = model.inputs if ref.section == Section.INPUT else model.outputs
        if ref.index >= len(ios):
            raise ValueError(f"{where}: {ref.section.name.lower()} {ref.index} of {len(ios)}")
        limit = ios[ref.index].size
    try:
        itemsize = numpy_dtype(ref.dtype).itemsize
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    end = ref.offset + math.prod(ref.shape) * itemsize
    if end > limit:
        raise ValueError(f"{where}: {ref.section.name} bytes {ref.offset}..{end} beyond its {limit} bytes")
