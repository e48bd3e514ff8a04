"""`cannrt prof report DIR --html OUT.html`: one self-contained page drawn with plotly.

The page carries plotly.js inline (nothing is fetched when it is viewed) and three figures: the
timeline of the profile's first tasks (host API threads, streams, AI cores, vector cores, SDMA
engines), per-kernel pipe utilisation bars, and the HBM in use over time; then the summary tables.
A script counts page errors (uncaught, rejected, console.error) into `data-errors` on <body> and
the drawn plots into `data-plots`.
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from cannrt.tools.profiler.report import ReportData

MAX_SLICES = 12000  # timeline bars drawn
MAX_COLOURED_OPS = 12  # ops with their own colour in the timeline; the rest are "other"
PIPES = ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
TRACK_ORDER = ("Host thread", "Stream", "AI Core", "AI Vector Core", "SDMA")

ERROR_HOOK = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
window.addEventListener("unhandledrejection", function (e) { window.__errors.push(String(e.reason)); });
(function () {
  var original = console.error;
  console.error = function () {
    window.__errors.push(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
window.addEventListener("load", function () { setTimeout(function () {
  document.body.dataset.errors = String(window.__errors.length);
  document.body.dataset.plots = String(document.querySelectorAll(".js-plotly-plot .main-svg").length);
}, 0); });
</script>"""

STYLE = """<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
.note { color: #666; font-size: 13px; }
</style>"""


def _track_key(track: tuple[str, str]) -> tuple[int, int, str, int]:
    group, name = track
    kind = next((i for i, prefix in enumerate(TRACK_ORDER) if name.startswith(prefix)), len(TRACK_ORDER))
    number = name.rsplit(" ", 1)[-1]
    return (0 if group == "Host" else 1, kind, group, int(number) if number.isdigit() else 0)


def timeline_figure(rows: list[list[Any]]) -> go.Figure:
    """Horizontal bars: one row per track, one colour per op (the busiest MAX_COLOURED_OPS)."""
    rows = rows[:MAX_SLICES]
    tracks = sorted({(r[0], r[1]) for r in rows}, key=_track_key)
    label = {t: f"{t[0]} · {t[1]}" for t in tracks}
    names = [name for name, _ in Counter(r[2] for r in rows).most_common(MAX_COLOURED_OPS)]
    groups: dict[str, list[list[Any]]] = {}
    for row in rows:
        groups.setdefault(row[2] if row[2] in names else "other", []).append(row)
    figure = go.Figure()
    palette = qualitative.Dark24
    for index, (name, members) in enumerate(groups.items()):
        figure.add_trace(
            go.Bar(
                name=name,
                marker_color="#999999" if name == "other" else palette[index % len(palette)],
                orientation="h",
                y=[label[(r[0], r[1])] for r in members],
                base=[r[3] for r in members],
                x=[max(r[4] - r[3], 1e-3) for r in members],
                hovertemplate=f"{html.escape(name)}<br>start %{{base:.3f}} us<br>%{{x:.3f}} us<extra></extra>",
            )
        )
    order = [label[t] for t in tracks]
    figure.update_yaxes(categoryorder="array", categoryarray=order[::-1], title=None)
    figure.update_xaxes(title="time (us)")
    figure.update_layout(
        barmode="overlay",
        title="Timeline",
        height=max(300, 60 + 22 * len(tracks)),
        legend={"title": "op"},
        margin={"l": 160},
    )
    return figure


def utilisation_figure(kernels: list[dict[str, Any]], top: int = 15) -> go.Figure:
    """Grouped bars: each kernel's busy-weighted pipe ratios (bound in the axis label)."""
    shown = kernels[:top]
    labels = [f"{k['name']} ({k['bound']})" for k in shown]
    figure = go.Figure()
    for pipe in PIPES:
        figure.add_trace(go.Bar(name=pipe, x=labels, y=[k["ratios"].get(pipe, 0.0) for k in shown]))
    figure.update_layout(barmode="group", title="Pipe utilisation per kernel (ratio of busy cycles)")
    figure.update_yaxes(range=[0, 1.05], title="ratio")
    return figure


def memory_figure(series: dict[int, tuple[list[float], list[float]]]) -> go.Figure:
    """HBM in use over time (steps at each sampled host call), one line per device."""
    figure = go.Figure()
    for device, (times, values) in sorted(series.items()):
        figure.add_trace(go.Scatter(name=f"NPU {device}", x=times, y=values, mode="lines", line_shape="hv"))
    figure.update_layout(title="HBM in use")
    figure.update_xaxes(title="time (us)")
    figure.update_yaxes(title="MiB", rangemode="tozero")
    return figure


def _html_table(head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{html.escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _tables(summary: dict[str, Any]) -> str:
    kernels = [
        [k["name"], k["type"], k["count"], f"{k['total_us']:.3f}", f"{100 * k['share']:.1f}"]
        + [f"{k['ratios'][p]:.2f}" for p in ("mac", "vec", "mte2", "mte3")]
        + [f"{k['l2_hit']:.2f}", k["bound"]]
        for k in summary["kernels"][:20]
    ]
    head = ["Op Name", "Type", "Count", "Total(us)", "Share %", "mac", "vec", "mte2", "mte3", "L2 hit", "bound"]
    overlap = [
        [d, len(e["streams_us"]), f"{e['busy_us']:.3f}", f"{e['overlap']:.2f}x"] for d, e in summary["overlap"].items()
    ]
    copies = [[c["direction"], c["count"], c["bytes"], f"{c['gbps']:.2f}"] for c in summary["copies"]]
    api = [[a[0], a[1], f"{a[2] / 1e3:.3f}", f"{a[2] / a[1] / 1e3:.3f}"] for a in summary["api"][:20]]
    return (
        "<h2>Kernels</h2>"
        + _html_table(head, kernels)
        + "<h2>Stream overlap</h2>"
        + _html_table(["Device", "Streams", "Busy(us)", "Overlap"], overlap)
        + "<h2>Copies</h2>"
        + _html_table(["Direction", "Count", "Bytes", "GB/s"], copies)
        + "<h2>API statistics</h2>"
        + _html_table(["API Name", "Count", "Time(us)", "Avg(us)"], api)
    )


def render_html(data: ReportData) -> str:
    """The whole page as one string."""
    s = data.summary
    rows = s.get("timeline_sample", [])
    sampled = s.get("timeline_sampled_tasks", 0)
    figures = [
        timeline_figure(rows),
        utilisation_figure(s["kernels"]),
        memory_figure(data.memory_series()),
    ]
    plots = "".join(
        pio.to_html(f, full_html=False, include_plotlyjs=False, config={"displaylogo": False}) for f in figures
    )
    note = f"Timeline: the first {sampled} of {s['tasks']} tasks" + (
        f" (first {MAX_SLICES} slices)" if len(rows) > MAX_SLICES else ""
    )
    title = html.escape(f"cannrt profile {data.folder.parent.name}")
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>{STYLE}{ERROR_HOOK}'
        f"<script>{get_plotlyjs()}</script></head><body><h1>{title}</h1>"
        f'<p class="note">{html.escape(s["chip"])}, {html.escape(s["aic_metrics"])}; {html.escape(note)}</p>'
        f"{plots}{_tables(s)}</body></html>"
    )


def write_html(data: ReportData, out: str | Path) -> Path:
    """Write the page; returns its path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path
