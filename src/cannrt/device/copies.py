"""Byte copies the device's engines make: host memory as uint8 views, and copies between lists
of views (a tensor or a copy may span several mappings)."""

from __future__ import annotations

import ctypes

import numpy as np


def host_array(address: int, nbytes: int) -> np.ndarray:
    """A uint8 view of real host memory at a process address."""
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    buffer = (ctypes.c_uint8 * nbytes).from_address(address)
    view: np.ndarray = np.ctypeslib.as_array(buffer)
    return view


def copy_parts(source: list[np.ndarray], target: list[np.ndarray]) -> None:
    """Copy bytes between two lists of uint8 views of equal total length."""
    if len(source) == 1 and len(target) == 1:
        np.copyto(target[0], source[0])
        return
    flat = np.concatenate(source) if len(source) > 1 else source[0]
    offset = 0
    for part in target:
        part[...] = flat[offset : offset + part.size]
        offset += part.size
