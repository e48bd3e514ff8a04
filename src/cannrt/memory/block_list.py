"""The address-ordered list of blocks a pool segment is cut into, shared by the caching allocator
(caching.py, aclrtMalloc's cache) and the stream-ordered pool (stream_ordered.py, aclrtMemPool):
splitting a block, merging two neighbours, and the best-fit order of free blocks."""

from __future__ import annotations

from typing import Protocol, Self, TypeVar


class ListedBlock(Protocol):
    """A block of a segment, linked to its neighbours in address order."""

    address: int
    size: int
    prev: Self | None
    next: Self | None


B = TypeVar("B", bound=ListedBlock)


def split_off(block: B, size: int, rest: B) -> B:
    """Keep the first size bytes in block and link rest (the remainder, made by the caller at
    block.address + size) after it; returns rest."""
    rest.prev, rest.next = block, block.next
    if block.next is not None:
        block.next.prev = rest
    block.next = rest
    block.size = size
    return rest


def merge_neighbours(block: B, neighbour: B) -> B:
    """One block of two adjacent ones: the lower-addressed one grows over the other, which
    leaves the list; returns the survivor."""
    first, second = (block, neighbour) if block.address < neighbour.address else (neighbour, block)
    first.size += second.size
    first.next = second.next
    if second.next is not None:
        second.next.prev = first
    return first


def fit_key(block: B) -> tuple[int, int, B]:
    """Sort key of a free list: smallest block first, then lowest address (best fit)."""
    return (block.size, block.address, block)
