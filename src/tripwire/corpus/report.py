"""``--report DIR``: an HTML page with PNG plots (matplotlib, the ``report`` extra).

``stats``: one histogram per signal with its threshold drawn, over every session (a bar per
integer peak, centred on it; ticks at whole numbers), one panel per signal comparing the corpora
when several paths were given, a legend of the table's terms, and per signal the sessions that
trip it, each linked to its file. ``sweep``: the curve of sessions tripping per threshold value,
split by label.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..signals import SIGNAL_IDS, WatchdogConfig
from .measure import NEVER, Measured, thresholds

__all__ = ["write_stats_report", "write_sweep_report", "histogram"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("--report needs the report extra: pip install 'tripwire[report]'") \
            from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, out: Path, name: str) -> str:
    """Write one figure as ``out/name`` and free it; returns the name the page links."""
    fig.tight_layout()
    fig.savefig(out / name)
    plt.close(fig)
    return name


def _page(title: str, body: str) -> str:
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}"
            "</title><style>body{font-family:sans-serif;margin:2em}img{max-width:48%;"
            "margin:0.5em}table{border-collapse:collapse}td,th{padding:0.2em 0.6em;"
            "border-bottom:1px solid #ccc;text-align:right}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}</body></html>\n")


def _table(rows: list[list[Any]], head: list[str]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _integer_axes(ax: Any, *, x: bool = True, y: bool = True) -> None:
    """Ticks at whole numbers only: every statistic and count here is an integer."""
    from matplotlib.ticker import MaxNLocator

    if x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def histogram(ax: Any, values: Sequence[int], threshold: int, signal: str) -> None:
    """One signal's peaks per session: one bar per integer value, centred on it (a bar spans
    value ± 0.5), and the threshold as the line between the last value that does not trip and
    the first that does."""
    top = max([*values, threshold]) + 1
    ax.hist(values, bins=[k - 0.5 for k in range(0, top + 2)], color="#4878a8",
            edgecolor="white", label="sessions (by their peak)")
    ax.axvline(threshold - 0.5, color="#c03030", linewidth=2,
               label=f"threshold {threshold}: peaks from {threshold} trip")
    ax.set_xlim(-0.5, top + 0.5)
    _integer_axes(ax)
    ax.set_title(signal)
    ax.set_xlabel("peak per session")
    ax.set_ylabel("sessions")
    ax.legend(fontsize=7)


_LEGEND = (
    "<dl>"
    "<dt>peak per session</dt><dd>the highest value the signal's statistic reached in a "
    "session: the quantity its threshold is compared with (the longest run of equivalent calls "
    "for <code>repeated-tool-call</code>, the most laps of a cycle, ...). In the histograms the "
    "threshold is the line between the last peak below it and the first at it.</dd>"
    "<dt>median, p90, p99, max</dt><dd>the peaks across sessions.</dd>"
    "<dt>margin</dt><dd>the threshold minus the highest peak: positive, no session came "
    "within that much of the threshold; zero or negative, some reached it.</dd>"
    "<dt>trips, trip rate</dt><dd>the sessions in which the signal raised its alert (as replay "
    "would report it), and their share of all sessions; each is listed below, linked to its "
    "file. A peak at the threshold without a trip is a pattern another signal reported first "
    "(the stand-downs that keep one behaviour to one alert).</dd>"
    "</dl>")


def _trips_list(results: Measured, i: int, out: Path) -> str:
    """The sessions that trip signal ``i``, each linked to its file (relative to the page)."""
    rows = [r for r in range(len(results)) if results.first_trip[r, i] != NEVER]
    if not rows:
        return "<p>No session trips it.</p>"
    items = []
    for r in rows:
        path = results.paths[r]
        href = urllib.parse.quote(os.path.relpath(path, out)) if path else ""
        name = html.escape(results.sessions[r])
        link = f"<a href='{html.escape(href)}'>{name}</a>" if href else name
        items.append(f"<li>{link}: peak {int(results.stats[r, i])}, first trip at event "
                     f"{int(results.first_trip[r, i])}</li>")
    return f"<p>{len(rows)} session{'s' if len(rows) != 1 else ''}:</p><ul>{''.join(items)}</ul>"


def write_stats_report(directory: str | Path, results: Measured,
                       config: WatchdogConfig, table: dict[str, Any]) -> Path:
    """Write ``index.html`` and its PNGs into ``directory``; returns the page's path."""
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    limits = thresholds(config)
    corpora = results.corpora()
    by_corpus = [results.of_corpus(c) for c in corpora]
    images = []
    for i, signal in enumerate(SIGNAL_IDS):
        fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
        histogram(ax, results.stats[:, i].tolist(), limits[i], signal)
        images.append(_save(plt, fig, out, f"hist-{signal}.png"))
    if len(corpora) > 1:
        for i, signal in enumerate(SIGNAL_IDS):
            fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
            groups = [rs.stats[:, i].tolist() for rs in by_corpus]
            ax.boxplot(groups, showfliers=True)
            ax.set_xticks(range(1, len(corpora) + 1),
                          [Path(c).name or c for c in corpora], rotation=20, fontsize=7)
            ax.axhline(limits[i], color="#c03030", linewidth=2, label=f"threshold {limits[i]}")
            _integer_axes(ax, x=False)
            ax.set_ylabel("peak per session")
            ax.set_title(f"{signal} by corpus")
            ax.legend(fontsize=7)
            images.append(_save(plt, fig, out, f"corpora-{signal}.png"))
    rows = [[signal, s["threshold"], f"{s['median']:.1f}", f"{s['p90']:.1f}", f"{s['p99']:.1f}",
             s["max"], s["margin"], s["trips"], f"{100 * s['trip_rate']:.1f}%"]
            for signal, s in table["signals"].items()]
    sections = "".join(
        f"<h2 id='trips-{html.escape(signal)}'>Sessions that trip {html.escape(signal)}</h2>"
        + _trips_list(results, i, out) for i, signal in enumerate(SIGNAL_IDS))
    body = (f"<p>{table['sessions']} sessions, {table['events']} events, from "
            f"{html.escape(', '.join(corpora))}.</p>"
            + _table(rows, ["signal", "threshold", "median", "p90", "p99", "max", "margin",
                            "trips", "trip rate"])
            + _LEGEND
            + "".join(f"<img src='{name}' alt='{name}'>" for name in images)
            + sections)
    page = out / "index.html"
    page.write_text(_page("tripwire corpus stats", body), encoding="utf-8")
    return page


def write_sweep_report(directory: str | Path, signal: str, points: Sequence[Any],
                       result: dict[str, Any]) -> Path:
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    values = [p.value for p in points]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=80)
    ax.plot(values, [p.trips for p in points], marker="o", label="all sessions")
    ax.plot(values, [p.healthy for p in points], marker="o", label="healthy")
    ax.plot(values, [p.unhealthy for p in points], marker="o", label="not healthy")
    ax.axvline(result["default"], color="#c03030", linestyle="--", label="default")
    _integer_axes(ax)
    ax.set_xlabel(f"{signal} {result['knob']}")
    ax.set_ylabel("sessions tripping")
    ax.legend()
    name = _save(plt, fig, out, f"sweep-{signal}.png")
    rows = [[p.value, p.trips, p.healthy, p.unhealthy, p.unlabelled,
             "-" if p.median_first_trip is None else f"{p.median_first_trip:.1f}"]
            for p in points]
    body = (f"<p>Smallest value with no healthy session tripping: "
            f"{result['smallest_without_healthy_trip']} (margin {result['margin']}).</p>"
            + _table(rows, ["value", "trips", "healthy", "not healthy", "unlabelled",
                            "median first trip"])
            + f"<img src='{name}' alt='{name}'>")
    page = out / "index.html"
    page.write_text(_page(f"tripwire corpus sweep: {signal}", body), encoding="utf-8")
    return page
