"""What a kernel fault's snapshot says: the tensor, the access, the block and the source line;
and the vector unit's float exceptions (overflow detection, saturation mode).

The executor calls these only after something went wrong (or a float flag was raised), so they
cost nothing on the normal path.
"""

from __future__ import annotations

import math

import numpy as np

from cannrt.abi import ParamValue, TensorArg, tensor_nbytes
from cannrt.device.access_site import SourceLine, locate_access, parameter_name
from cannrt.device.memory import DeviceFault
from cannrt.device.reports import FaultSite
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.registry import Kernel

FP_DIVIDE = 1  # numpy's floating-point flags, as the errstate callback receives them
FP_OVERFLOW = 2
FP_INVALID = 8


def tensor_text(arg: TensorArg) -> str:
    """e.g. float32[4, 1025]."""
    return f"{numpy_dtype(arg.dtype).name}[{', '.join(str(d) for d in arg.shape)}]"


def block_of_element(kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int, index: int, element: int) -> int:
    """The logical block whose share of the work holds element `element` of tensor argument
    `index` (blocks take consecutive shares, as Kernel.block_fractions splits the work)."""
    arg = args[index]
    assert isinstance(arg, TensorArg)
    count = max(1, math.prod(arg.shape))
    try:
        fractions = kernel.block_fractions(kernel.work(list(args)), max(1, block_dim))
    except Exception:  # a work model that cannot cost these arguments: one block
        return 0
    position = min(max(element, 0), count - 1) / count
    reached = 0.0
    for block, fraction in enumerate(fractions):
        reached += fraction
        if position < reached - 1e-12:
            return block
    return len(fractions) - 1


def _site(
    kernel: Kernel,
    args: tuple[ParamValue, ...],
    block_dim: int,
    index: int,
    kind: str,
    first_bad: int,
    line: SourceLine | None,
) -> FaultSite:
    arg = args[index]
    assert isinstance(arg, TensorArg)
    itemsize = numpy_dtype(arg.dtype).itemsize
    element = (first_bad - arg.address) // itemsize
    return FaultSite(
        arg_index=index,
        arg_name=parameter_name(kernel.compute, index),
        tensor=tensor_text(arg),
        access_kind=kind,
        access_address=arg.address,
        access_size=tensor_nbytes(arg),
        fault_address=first_bad,
        block_index=block_of_element(kernel, args, block_dim, index, element),
        source=str(line) if line else "",
        line=line.line if line else 0,
    )


def first_refused_byte(fault: DeviceFault) -> int:
    """The first byte of a refused access that lies outside the allocation it started in."""
    near = fault.nearest
    if fault.owner_asid is not None and fault.owner_asid != fault.asid:
        return fault.address
    if near is not None and near.va <= fault.address < near.va + near.valid:
        return near.va + near.valid
    return fault.address


def argument_site(
    kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int, index: int, fault: DeviceFault
) -> FaultSite:
    """The snapshot of an argument the MMU refused: the kernel line that first touches it."""
    line = locate_access(kernel.compute, args, index)
    return _site(kernel, args, block_dim, index, fault.kind, first_refused_byte(fault), line)


def argument_message(fault: DeviceFault, text: str, misaligned: bool, site: FaultSite) -> str:
    """errorStr of a refused argument: the MMU's mappings are no user allocation, so they are
    not named (the runtime's report names the user allocation); misaligned and foreign
    accesses, and accesses the MMU refuses for a reason of its own (freed, read-only), keep
    their own text."""
    foreign = fault.owner_asid is not None and fault.owner_asid != fault.asid
    reason = bool(getattr(fault, "reason", None))  # the MMU's own reason (freed, read-only)
    if misaligned or foreign or reason:
        return text
    return (
        f"invalid {fault.kind} of {fault.nbytes} bytes at 0x{fault.address:x}: "
        f"byte 0x{site.fault_address:x} is not mapped for this kernel"
    )


def misaligned_site(kernel: Kernel, args: tuple[ParamValue, ...], block_dim: int, index: int, write: bool) -> FaultSite:
    """The snapshot of a tensor whose address is not a multiple of its dtype's size."""
    arg = args[index]
    assert isinstance(arg, TensorArg)
    line = locate_access(kernel.compute, args, index)
    return _site(kernel, args, block_dim, index, "write" if write else "read", arg.address, line)


def overflow_site(
    kernel: Kernel, args: tuple[ParamValue, ...], values: list[object], block_dim: int, line: SourceLine | None
) -> FaultSite:
    """The snapshot of a float exception: the first output holding a non-finite value, the block
    whose share holds its first such element, and the line that raised the flag."""
    for index in kernel.outputs:
        value = values[index] if index < len(values) else None
        arg = args[index]
        if isinstance(value, np.ndarray) and isinstance(arg, TensorArg) and value.dtype.kind == "f":
            bad = ~np.isfinite(value.reshape(-1))
            if bad.any():
                element = int(np.argmax(bad))
                first_bad = arg.address + element * value.dtype.itemsize
                return _site(kernel, args, block_dim, index, "write", first_bad, line)
    index = kernel.outputs[0] if kernel.outputs else -1
    output = args[index] if index >= 0 else None
    if isinstance(output, TensorArg):
        return _site(kernel, args, block_dim, index, "write", output.address, line)
    return FaultSite(source=str(line) if line else "", line=line.line if line else 0)


def saturate(kernel: Kernel, values: list[object]) -> None:
    """Saturation mode: float outputs hold the largest finite value instead of inf, 0 for nan."""
    for index in kernel.outputs:
        value = values[index] if index < len(values) else None
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            finfo = np.finfo(value.dtype)
            np.nan_to_num(value, copy=False, nan=0.0, posinf=float(finfo.max), neginf=float(finfo.min))


def overflow_bits(flags: int) -> tuple[str, ...]:
    """The vector unit's error bits of numpy float flags."""
    bits = []
    if flags & FP_DIVIDE:
        bits.append("VEC_DIV0")
    if flags & (FP_OVERFLOW | FP_INVALID):
        bits.append("VEC_INF_NAN")
    return tuple(bits)
