"""`cannrt prof report DIR`: the terminal summary, the HTML page, and the page in a real browser."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

import cannrt
from cannrt.api.profile import profile
from cannrt.cli.prof import report_main
from cannrt.runtime.core import Runtime
from cannrt.tools.profiler.html import write_html
from cannrt.tools.profiler.report import ReportError, find_report, render_text

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def profiled(root: Path) -> Path:
    device = cannrt.Device(0)
    first, second = device.stream(), device.stream()
    x = device.array(np.ones((512, 512), np.float16))
    y = device.empty((512, 512), np.float32)
    with profile(root) as prof:
        extra = device.empty((1 << 20,), np.float32)
        first.launch("matmul", x, x, y, block_dim=24, name="fc1/MatMul")
        first.launch("gelu", y, y, block_dim=48)
        second.launch("relu", extra, extra, block_dim=48)
        y.to_numpy(first)
        extra.free()
        device.synchronize()
    assert prof.path is not None
    return prof.path


def test_the_terminal_summary_names_kernels_overlap_copies_and_api_calls(rt: Runtime, tmp_path: Path) -> None:
    text = render_text(find_report(profiled(tmp_path)))
    assert "fc1/MatMul" in text and "gelu" in text and "relu" in text
    (matmul,) = [line for line in text.splitlines() if "fc1/MatMul" in line]
    assert "AI_CORE" in matmul and matmul.rstrip(" │").rsplit(" ", 1)[-1] in ("cube", "memory")
    for heading in ("Top kernels by device time", "Stream overlap", "Copies", "API statistics", "peak HBM in use"):
        assert heading in text
    assert re.search(r"D2H\s*│\s*1\s*│\s*1048576", text)  # the download: 512 x 512 fp32


def test_report_accepts_the_output_root_the_prof_folder_or_its_output_folder(rt: Runtime, tmp_path: Path) -> None:
    folder = profiled(tmp_path)
    for path in (tmp_path, folder, folder / "mindstudio_profiler_output"):
        assert find_report(path).folder == folder / "mindstudio_profiler_output"


def test_report_on_a_folder_without_a_profile_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ReportError):
        find_report(tmp_path)
    assert report_main([str(tmp_path)]) == 2
    assert report_main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("cannrt prof report:") for line in err)


def test_the_html_page_is_self_contained(rt: Runtime, tmp_path: Path) -> None:
    page = write_html(find_report(profiled(tmp_path)), tmp_path / "report.html").read_text()
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    assert "Plotly.newPlot" in page and "fc1/MatMul" in page and "HBM in use" in page


def browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def png_colours(path: Path) -> int:
    """Distinct pixel bytes of an 8-bit PNG's scanlines (a blank page has a handful)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = b"", 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return len(set(zlib.decompress(chunks)))


@pytest.mark.skipif(browser() is None, reason="no Chromium here (.ci/run installs Debian's chromium)")
def test_the_page_renders_in_headless_chromium_without_errors(rt: Runtime, tmp_path: Path) -> None:
    page = write_html(find_report(profiled(tmp_path)), tmp_path / "report.html").resolve()
    common = [str(browser()), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000"]
    dom = subprocess.run(
        [*common, "--enable-logging=stderr", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180
    )
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None, dom.stderr[-2000:]
    assert 'data-errors="0"' in body.group(0), dom.stderr[-2000:]
    plots = re.search(r'data-plots="(\d+)"', body.group(0))
    assert plots is not None and int(plots.group(1)) >= 3  # timeline, utilisation bars, memory plot
    assert "Uncaught" not in dom.stderr
    shot = tmp_path / "report.png"
    subprocess.run(
        [*common, "--hide-scrollbars", "--window-size=1400,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=180,
    )
    assert shot.is_file() and png_colours(shot) > 64
