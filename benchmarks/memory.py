"""Device-memory benchmark: what the pools save, measured against baselines of the same run.

- cached pair: `Device.empty` + `free` of a size the caching pool holds, against a first-time
  allocation of the same size (a new segment mapped from HBM, after `empty_cache`);
- stream-ordered pair: `Stream.malloc_async` + `free_async` on one stream, against an
  aclrtMalloc + aclrtFree pair (`memory_ops.malloc` / `free`) of the same size;
- fragmentation: peak reserved / peak allocated bytes of the caching pool while it replays the
  allocation trace of a transformer training step (two steps: forward activations kept for
  backward, gradients, Adam states, the logits), generated here. Goal <= 1.10 (PyTorch's
  expandable-segments notes report up to 43 % waste for online allocators on such traces).
Run: python3 benchmarks/memory.py [--pairs N] [--layers L]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.runtime import memory_ops

GOAL_FRAGMENTATION = 1.10
PAIR_BYTES = 1 << 20  # one MiB: a small-pool block, an aclrtMalloc of normal pages


def per_pair_us(pair: Callable[[], None], count: int) -> float:
    """Microseconds per call of pair, best of three rounds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(count):
            pair()
        best = min(best, (time.perf_counter() - start) / count * 1e6)
    return best


def cached_pair(device: cannrt.Device) -> Callable[[], None]:
    def pair() -> None:
        device.empty(PAIR_BYTES, np.uint8).free()

    device.empty(PAIR_BYTES, np.uint8).free()  # the pool holds the segment from here on
    return pair


def first_time_pair(device: cannrt.Device) -> Callable[[], None]:
    def pair() -> None:
        device.empty(PAIR_BYTES, np.uint8).free()
        device.empty_cache()  # the next allocation maps a new segment again

    return pair


def stream_ordered_pair(stream: cannrt.Stream) -> Callable[[], None]:
    def pair() -> None:
        stream.free_async(stream.malloc_async(PAIR_BYTES, np.uint8))

    return pair


def malloc_pair(device: cannrt.Device) -> Callable[[], None]:
    context = device.context

    def pair() -> None:
        memory_ops.free(context, memory_ops.malloc(context, PAIR_BYTES))

    return pair


@dataclass(frozen=True)
class Op:
    """One step of an allocation trace: allocate `size` bytes under `name`, or free `name`."""

    name: str
    size: int = 0  # 0: a free


def transformer_step(step: int, layers: int, batch: int = 4, seq: int = 1024, hidden: int = 1024) -> Iterator[Op]:
    """The allocations of one training step of a decoder-only transformer in fp16 with fp32
    Adam states (created in the first step), activations kept from forward to backward."""
    half, heads, vocab = 2, 16, 32000
    tokens = batch * seq
    weights = {
        "qkv": 3 * hidden * hidden,
        "proj": hidden * hidden,
        "fc1": 4 * hidden * hidden,
        "fc2": 4 * hidden * hidden,
    }
    if step == 0:
        for layer in range(layers):
            for w, n in weights.items():
                yield Op(f"w{layer}.{w}", n * half)
                yield Op(f"adam_m{layer}.{w}", n * 4)
                yield Op(f"adam_v{layer}.{w}", n * 4)
        yield Op("embedding", vocab * hidden * half)
    yield Op("x", tokens * hidden * half)
    for layer in range(layers):  # forward: keep what backward needs
        kept = {
            "ln1": tokens * hidden,
            "qkv": 3 * tokens * hidden,
            "probs": batch * heads * seq * seq,
            "attn": tokens * hidden,
            "ln2": tokens * hidden,
            "fc1": 4 * tokens * hidden,
            "gelu": 4 * tokens * hidden,
        }
        for name, n in kept.items():
            yield Op(f"a{layer}.{name}", n * half)
            if name == "qkv":
                yield Op(f"t{layer}.scores", batch * heads * seq * seq * half)  # raw scores: freed by softmax
            if name == "probs":
                yield Op(f"t{layer}.scores")
        yield Op(f"t{layer}.out", tokens * hidden * half)
        yield Op(f"t{layer}.out")
    yield Op("logits", tokens * vocab * 4)
    yield Op("dlogits", tokens * vocab * 4)
    yield Op("logits")
    yield Op("dx", tokens * hidden * half)
    yield Op("dlogits")
    for layer in reversed(range(layers)):  # backward: gradients appear, activations go
        for w, n in weights.items():
            yield Op(f"g{layer}.{w}", n * half)
        for name in ("gelu", "fc1", "ln2", "attn", "probs", "qkv", "ln1"):
            yield Op(f"d{layer}.{name}", tokens * hidden * half * (4 if name in ("gelu", "fc1") else 1))
            yield Op(f"a{layer}.{name}")
            yield Op(f"d{layer}.{name}")
    yield Op("dx")
    yield Op("x")
    for layer in range(layers):  # the optimizer step consumes the gradients
        for w in weights:
            yield Op(f"g{layer}.{w}")


def replay(device: cannrt.Device, steps: int, layers: int) -> tuple[int, int, int]:
    """Replay the trace through the caching pool; (peak reserved, peak allocated, operations)."""
    live: dict[str, cannrt.DeviceArray] = {}
    count = 0
    for step in range(steps):
        for op in transformer_step(step, layers):
            count += 1
            if op.size:
                live[op.name] = device.empty(op.size, np.uint8)
            else:
                live.pop(op.name).free()
    stats = device.memory_stats()
    for array in live.values():
        array.free()
    return stats["reserved_bytes.all.peak"], stats["allocated_bytes.all.peak"], count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2000, help="allocation pairs per timing round")
    parser.add_argument("--layers", type=int, default=12, help="transformer layers of the replayed trace")
    args = parser.parse_args()
    device = cannrt.Device(0)
    stream = device.stream()
    cached = per_pair_us(cached_pair(device), args.pairs)
    first = per_pair_us(first_time_pair(device), max(1, args.pairs // 4))
    ordered = per_pair_us(stream_ordered_pair(stream), args.pairs)
    plain = per_pair_us(malloc_pair(device), args.pairs)
    device.empty_cache()
    reserved, allocated, ops = replay(device, 2, args.layers)
    fragmentation = reserved / allocated

    table = Table(title=f"Device memory ({device.name}, same-run baselines)")
    for column in ("measurement", "value", "baseline", "ratio", "goal"):
        table.add_column(column, justify="left" if column in ("measurement", "baseline") else "right")
    table.add_row(
        "cached empty+free pair (1 MiB)", f"{cached:.2f} us", f"first-time allocation {first:.2f} us",
        f"{first / cached:.1f}x faster", "",
    )  # fmt: skip
    table.add_row(
        "malloc_async+free_async pair (1 MiB)", f"{ordered:.2f} us", f"aclrtMalloc+aclrtFree {plain:.2f} us",
        f"{plain / ordered:.1f}x faster", "",
    )  # fmt: skip
    verdict = "met" if fragmentation <= GOAL_FRAGMENTATION else "missed"
    table.add_row(
        f"fragmentation, transformer trace ({args.layers} layers, 2 steps, {ops} ops)",
        f"{reserved / 2**30:.2f} GiB reserved",
        f"{allocated / 2**30:.2f} GiB allocated (peaks)",
        f"{fragmentation:.3f}",
        f"<= {GOAL_FRAGMENTATION} ({verdict})",
    )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
