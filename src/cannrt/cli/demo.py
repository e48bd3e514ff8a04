"""`cannrt demo`: a pipelined multi-stream workload checked against numpy.

Copies in on one stream, matmul + gelu + softmax on two compute streams, copies out on another,
chained by events over several micro-batches; then the same work on one stream, to measure the
overlap the pipeline achieves on the modelled device clock.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cannrt.api import Device, DeviceArray, Event, Stream
from cannrt.api.profile import Profile, profile
from cannrt.config import load_settings
from cannrt.runtime.core import reset_runtime

COMPUTE_STREAMS = 2


@dataclass
class Batch:
    """One micro-batch: host input and output, device buffers, and its events."""

    host_in: np.ndarray
    host_out: np.ndarray
    x: DeviceArray
    y: DeviceArray
    z: DeviceArray
    p: DeviceArray
    copied_in: Event
    computed: Event
    copied_out: Event


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy's answer: softmax(gelu(x @ w)) in fp32 from fp16 inputs."""
    y = x.astype(np.float32) @ w.astype(np.float32)
    g = y / (1.0 + np.exp(-1.59576912 * (y + 0.044715 * y**3)))
    e = np.exp(g - g.max(axis=-1, keepdims=True))
    result: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return result


def _make_batches(device: Device, inputs: list[np.ndarray]) -> list[Batch]:
    size = inputs[0].shape[0]
    batches = []
    for host_in in inputs:
        batches.append(
            Batch(
                host_in=host_in,
                host_out=np.empty((size, size), np.float32),
                x=device.empty((size, size), np.float16),
                y=device.empty((size, size), np.float32),
                z=device.empty((size, size), np.float32),
                p=device.empty((size, size), np.float32),
                copied_in=device.event(),
                computed=device.event(),
                copied_out=device.event(),
            )
        )
    return batches


def _enqueue(batch: Batch, w: DeviceArray, copy_in: Stream, compute: Stream, copy_out: Stream) -> None:
    block_dim = 24
    batch.x.copy_from(batch.host_in, copy_in)
    batch.copied_in.record(copy_in)
    compute.wait(batch.copied_in)
    compute.launch("matmul", batch.x, w, batch.y, block_dim=block_dim)
    compute.launch("gelu", batch.y, batch.z, block_dim=block_dim * 2)
    compute.launch("softmax", batch.z, batch.p, -1, block_dim=block_dim * 2)
    batch.computed.record(compute)
    copy_out.wait(batch.computed)
    batch.p.copy_to(batch.host_out, copy_out)
    batch.copied_out.record(copy_out)


def run_pipeline(
    inputs: list[np.ndarray],
    w_host: np.ndarray,
    chip: str,
    pipelined: bool,
    progress: Progress | None,
    profile_dir: str | None = None,
) -> tuple[float, list[np.ndarray]]:
    """Run all batches; returns (modelled device ms, outputs). One stream when not pipelined.
    With profile_dir, the run is profiled and its msprof folder written there."""
    runtime = reset_runtime(load_settings().with_chip(chip))
    device = Device(0)
    with profile(profile_dir) if profile_dir else contextlib.nullcontext() as prof:
        device_ms, outputs = _run_batches(device, inputs, w_host, pipelined, progress)
    if isinstance(prof, Profile):
        Console().print(prof.table())
        Console().print(f"profile written to {prof.path}")
    runtime.close()
    return device_ms, outputs


def _run_batches(
    device: Device, inputs: list[np.ndarray], w_host: np.ndarray, pipelined: bool, progress: Progress | None
) -> tuple[float, list[np.ndarray]]:
    w = device.array(w_host)
    batches = _make_batches(device, inputs)
    if pipelined:
        copy_in, copy_out = device.stream(), device.stream()
        computes = [device.stream() for _ in range(COMPUTE_STREAMS)]
    else:
        copy_in = copy_out = device.stream()
        computes = [copy_in]
    start = copy_in.record()
    for index, batch in enumerate(batches):
        _enqueue(batch, w, copy_in, computes[index % len(computes)], copy_out)
    task = progress.add_task("pipelined" if pipelined else "one stream", total=len(batches)) if progress else None
    outputs = []
    for batch in batches:
        batch.copied_out.synchronize()
        outputs.append(batch.host_out)
        if progress is not None and task is not None:
            progress.advance(task)
    device_ms = start.elapsed_ms(batches[-1].copied_out)
    return device_ms, outputs


def run_demo(batches: int = 8, size: int = 512, chip: str = "Ascend910B1", profile_dir: str | None = None) -> int:
    """The main job: returns the process exit code (0 when every result matches numpy)."""
    console = Console()
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((size, size)).astype(np.float16) for _ in range(batches)]
    w_host = (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float16)
    console.print(f"cannrt demo: {batches} micro-batches of softmax(gelu(x @ w)), {size}x{size} fp16, on {chip}")
    wall = time.perf_counter()
    with Progress(console=console, transient=False) as progress:
        piped_ms, piped_out = run_pipeline(inputs, w_host, chip, True, progress, profile_dir)
        serial_ms, serial_out = run_pipeline(inputs, w_host, chip, False, progress)
    wall = time.perf_counter() - wall
    worst = 0.0
    for x, got_piped, got_serial in zip(inputs, piped_out, serial_out, strict=True):
        expected = reference(x, w_host)
        worst = max(worst, float(np.abs(got_piped - expected).max()), float(np.abs(got_serial - expected).max()))
    ok = worst < 1e-4
    table = Table(title="results")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("modelled device time, pipelined (4 streams)", f"{piped_ms:.3f} ms")
    table.add_row("modelled device time, one stream", f"{serial_ms:.3f} ms")
    table.add_row("overlap speed-up", f"{serial_ms / piped_ms:.2f}x")
    table.add_row("max |error| vs numpy", f"{worst:.2e}")
    table.add_row("wall time (both runs)", f"{wall:.2f} s")
    console.print(table)
    console.print("[green]all results match numpy[/green]" if ok else "[red]results differ from numpy[/red]")
    return 0 if ok else 1
