"""A kernel's arguments as numpy views of device memory, made through the MMU and reused while
the mappings behind them are unchanged (an address space's generation moves on every map,
unmap and pool annotation)."""

from __future__ import annotations

import numpy as np

from cannrt.abi import ParamValue, TensorArg, tensor_nbytes
from cannrt.device.fabric import Fabric
from cannrt.device.memory import AddressSpace, DeviceFault
from cannrt.dtypes import numpy_dtype

CACHE_LIMIT = 4096  # argument lists kept before the cache starts over
Scatter = list[tuple[np.ndarray, list[np.ndarray]]]  # outputs gathered over several mappings
Values = tuple[list[object], Scatter]
_NOTHING: Values = ([], [])  # never changed: what a kernel without arguments gets


class ArgumentFault(Exception):
    """Argument `index` is not accessible: `fault` says how (`misaligned`: its address is not a
    multiple of its dtype's size, MTE_ERR_ADDR_MISALIGN)."""

    def __init__(self, index: int, fault: DeviceFault, misaligned: bool = False, itemsize: int = 1) -> None:
        if misaligned:
            text = (
                f"misaligned {fault.kind} of {fault.nbytes} bytes at 0x{fault.address:x}: "
                f"not a multiple of the {itemsize}-byte element size"
            )
        else:
            text = str(fault)
        super().__init__(text)
        self.index = index
        self.fault = fault
        self.misaligned = misaligned


class ArgumentViews:
    """Maps kernel arguments to the values a kernel computes on (views for tensors)."""

    def __init__(self, fabric: Fabric) -> None:
        self._fabric = fabric
        # id(arguments) -> (arguments, output indices, space, its generation then, (values, no
        # scatter)). By identity: the fetcher hands out one tuple per distinct parameter block,
        # and equal tuples can differ in what they carry (1 == 1.0 == True)
        self._cache: dict[int, tuple[tuple[ParamValue, ...], tuple[int, ...], AddressSpace, int, Values]] = {}

    def of(self, asid: int, args: tuple[ParamValue, ...], outputs: tuple[int, ...]) -> Values:
        """The values for args in address space asid, and the outputs to scatter back after the
        kernel (a tensor spanning several mappings is computed on a gathered copy). Raises
        ArgumentFault for an argument the MMU refuses."""
        if not args:
            return _NOTHING
        space = self._fabric.space(asid)
        cached = self._cache.get(id(args))
        if (
            cached is not None
            and cached[0] is args
            and cached[2] is space
            and cached[3] == space.generation
            and cached[1] == outputs
        ):
            return cached[4]
        generation = space.generation
        values: list[object] = []
        scatter: Scatter = []
        for index, arg in enumerate(args):
            if arg.__class__ is TensorArg:
                dtype = numpy_dtype(arg.dtype)
                itemsize = dtype.itemsize
                if arg.address % itemsize:
                    kind = "write" if index in outputs else "read"
                    fault = DeviceFault(kind, arg.address, tensor_nbytes(arg), None, space.asid)
                    raise ArgumentFault(index, fault, misaligned=True, itemsize=itemsize)
                try:
                    values.append(self._tensor(space, arg, dtype, index in outputs, scatter))
                except DeviceFault as fault:
                    raise ArgumentFault(index, fault) from None
            else:
                values.append(arg)
        if not scatter:
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[id(args)] = (args, outputs, space, generation, (values, []))
        return values, scatter

    def _tensor(
        self, space: AddressSpace, arg: TensorArg, dtype: np.dtype, write: bool, scatter: Scatter
    ) -> np.ndarray:
        """A typed view of device memory; a tensor spanning several mappings is gathered into a
        copy (and scattered back after the kernel if it is an output)."""
        nbytes = tensor_nbytes(arg)
        kind = "write" if write else "read"
        if Fabric.asid_of(arg.address) != space.asid:  # AI cores reach only their own context's memory
            owner = self._fabric.owner(arg.address)
            raise DeviceFault(kind, arg.address, nbytes, None, space.asid, owner.asid if owner else -1)
        parts = space.segments(arg.address, nbytes, kind)
        raw = parts[0] if len(parts) == 1 else np.concatenate(parts)
        typed: np.ndarray = raw.view(dtype).reshape(arg.shape)
        if len(parts) > 1 and write:
            scatter.append((typed, parts))
        return typed
