"""Kernel binaries: name -> numpy implementation + work model + tiling over blockDim.

Models registering a kernel binary with the runtime (rtDevBinaryRegister / rtFunctionRegister):
users add their own kernels with `register_kernel` exactly as the built-ins are added.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cannrt.abi import CoreKind, TensorArg, Work


class KernelArgumentError(ValueError):
    """Arguments that do not fit a kernel's signature (shapes, dtypes, counts)."""


Args = Sequence[Any]  # numpy arrays for tensors, Python scalars otherwise
ArgSpecs = Sequence[TensorArg | int | float]


@dataclass(frozen=True)
class Kernel:
    """A kernel binary the device can run."""

    name: str
    compute: Callable[..., None]  # writes outputs in place; called with arrays and scalars
    work: Callable[[ArgSpecs], Work]
    check: Callable[[ArgSpecs], None]  # raises KernelArgumentError
    outputs: tuple[int, ...]  # argument indices the kernel writes
    core_kind: CoreKind = CoreKind.AIVEC

    def block_fractions(self, work: Work, block_dim: int) -> list[float]:
        """Share of the work each block does: units split as evenly as possible."""
        units = max(1, work.units)
        base, extra = divmod(units, block_dim)
        return [(base + (1 if b < extra else 0)) / units for b in range(block_dim)]


_REGISTRY: dict[str, Kernel] = {}
_LOCK = threading.Lock()
GENERATION = [0]
"""Moves whenever a kernel is registered or replaced: launch caches compare against it."""


def register_kernel(kernel: Kernel, *, replace: bool = False) -> Kernel:
    """Add a kernel; ValueError if the name is taken (unless replace)."""
    with _LOCK:
        if kernel.name in _REGISTRY and not replace:
            raise ValueError(f"kernel {kernel.name!r} is already registered")
        _REGISTRY[kernel.name] = kernel
        GENERATION[0] += 1
    return kernel


def get_kernel(name: str) -> Kernel:
    """The kernel registered under name; KeyError if none."""
    return _REGISTRY[name]


current_kernel: Callable[[str], Kernel | None] = _REGISTRY.get
"""The kernel registered under name now (None if none): caches compare against it."""


def kernel_names() -> list[str]:
    """Names of all registered kernels."""
    return sorted(_REGISTRY)


def require_tensors(name: str, specs: ArgSpecs, count: int, scalars: int = 0) -> list[TensorArg]:
    """The first count arguments as tensors, followed by at most `scalars` more arguments;
    KernelArgumentError otherwise."""
    if not count <= len(specs) <= count + scalars:
        most = f" and up to {scalars} scalars" if scalars else ""
        raise KernelArgumentError(f"{name} takes {count} tensors{most}, got {len(specs)} arguments")
    tensors = list(specs[:count])
    for index, spec in enumerate(tensors):
        if not isinstance(spec, TensorArg):
            raise KernelArgumentError(f"{name}: argument {index} must be a tensor")
    return tensors  # type: ignore[return-value]
