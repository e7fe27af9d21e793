"""The report's plots: matplotlib (Agg backend) figures as SVG text to inline in the page.

Every plot is made from the report's data (:mod:`.collect`) and returned by :func:`to_svg` as
an ``<svg>`` element that needs nothing outside the page: no XML declaration, DOCTYPE or
namespace URLs, no metadata, no ``<style>`` element and no ``style`` attributes (they become
presentation attributes, so a Content-Security-Policy without ``'unsafe-inline'`` renders
them), element ids prefixed per plot (several plots in one page never share an id). Text
stays text (``svg.fonttype: none``): the page can be searched and is small.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: never a display, never a GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402

#: colour-blind-safe palette (Okabe–Ito), one colour per configuration version
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
LAYER_COLOURS = {"filter": "#0072B2", "database": "#009E73", "sandbox": "#E69F00", "cap": "#CC79A7",
                 "sql error": "#999999", "declined": "#F0E442", "got through": "#D55E00"}
WIDTH_IN = 8.6
_PROPS = frozenset({
    "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity",
    "stroke-linecap", "stroke-linejoin", "stroke-dasharray", "stroke-dashoffset",
    "stroke-miterlimit", "opacity", "font-size", "font-family", "font-weight", "font-style",
    "text-anchor", "dominant-baseline", "clip-rule", "color",
})
_RC = {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
       "axes.titlesize": 10, "axes.titleweight": "bold", "legend.fontsize": 8, "legend.frameon": False}


def text(s: object) -> str:
    """A label as matplotlib must print it: ``$`` is not mathtext."""
    return str(s).replace("$", r"\$")


def _style_to_attributes(match: re.Match) -> str:
    out = []
    for part in match.group(1).split(";"):
        name, _, value = part.partition(":")
        name, value = name.strip(), value.strip()
        if name in _PROPS and value:
            out.append(f'{name}="{html.escape(value, quote=True)}"')
    return " ".join(out)


def to_svg(fig, name: str, title: str) -> str:
    """The figure as a self-contained ``<svg>`` element (see module doc); closes the figure."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": name, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight",
                    metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r"<style[^>]*>.*?</style>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = svg.replace("xlink:href=", "href=")
    svg = re.sub(r'style="([^"]*)"', _style_to_attributes, svg)
    referenced = set(re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
    svg = re.sub(r'\sid="([^"]*)"', lambda m: f' id="{name}-{m.group(1)}"'
                 if m.group(1) in referenced else "", svg)
    svg = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)
    label = html.escape(title, quote=True)
    return svg.replace("<svg", f'<svg class="plot" role="img" aria-label="{label}"', 1).strip()


def _pct(v: float | None) -> float:
    return float("nan") if v is None else 100 * v


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def forest(groups: Sequence[str], series: Sequence[str], values, name: str, title: str,
           xlabel: str = "percent (95% interval)", xlim: tuple[float, float] | None = (0, 100),
           zero_line: bool = False) -> str:
    """Points with interval bars, one row per (group, series): ``values[g][s] = (v, lo, hi)``
    as fractions (None: not measured, left out; a group measured by none is not drawn).
    ``title`` names the plot for screen readers (the page's heading shows it). Nothing
    measured at all (every attempt an error, say): no figure, ``""``."""
    groups = [g for g in groups if any(v is not None and v[0] is not None
                                       for v in values.get(g, {}).values())]
    if not groups:
        return ""
    n = max(1, len(series))
    rows = len(groups) * n
    with matplotlib.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.6 + 0.24 * rows + 0.3 * (n > 1)))
        step = 0.8 / n
        for si, s in enumerate(series):
            ys, xs, lo, hi = [], [], [], []
            for gi, g in enumerate(groups):
                v = values.get(g, {}).get(s)
                if v is None or v[0] is None:
                    continue
                y = gi + (si - (n - 1) / 2) * step
                x = _pct(v[0])
                ys.append(y)
                xs.append(x)
                lo.append(max(0.0, x - _pct(v[1])) if v[1] is not None else 0.0)
                hi.append(max(0.0, _pct(v[2]) - x) if v[2] is not None else 0.0)
            ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", color=colour(si), ecolor=colour(si),
                        elinewidth=1.4, capsize=3, markersize=5, label=text(s))
        ax.set_yticks(range(len(groups)), [text(g) for g in groups])
        ax.invert_yaxis()
        ax.set_ylim(len(groups) - 0.5, -0.5)
        if xlim is not None:  # a little room: a point at 0 or 100 is drawn whole
            pad = (xlim[1] - xlim[0]) * 0.02
            ax.set_xlim(xlim[0] - pad, xlim[1] + pad)
        if zero_line:
            ax.axvline(0, color="#555555", linewidth=0.8)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel(xlabel)
        if n > 1:
            ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(n, 3), borderaxespad=0.4)
        return to_svg(fig, name, title)


def grouped_bars(categories: Sequence[str], series: Sequence[str], counts, name: str,
                 title: str, xlabel: str = "failed attempts") -> str:
    """Horizontal bars, one group per category: ``counts[c][s]``."""
    n = max(1, len(series))
    with matplotlib.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.7 + 0.22 * len(categories) * n + 0.3 * (n > 1)))
        h = 0.8 / n
        for si, s in enumerate(series):
            ys = [ci + (si - (n - 1) / 2) * h for ci in range(len(categories))]
            vals = [counts.get(c, {}).get(s, 0) for c in categories]
            bars = ax.barh(ys, vals, height=h * 0.9, color=colour(si), label=text(s))
            ax.bar_label(bars, labels=[str(v) if v else "" for v in vals], padding=2, fontsize=7)
        ax.set_yticks(range(len(categories)), [text(c) for c in categories])
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.margins(x=0.1)
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(n, 3), borderaxespad=0.4)
        return to_svg(fig, name, title)


def per_run(series: dict[str, list[tuple[int, float | None, float | None]]], name: str, title: str) -> str:
    """Accuracy (solid) and strict accuracy (dashed) per run index, one colour per version."""
    with matplotlib.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6))
        runs: set[int] = set()
        for si, (label, pts) in enumerate(series.items()):
            xs = [p[0] for p in pts]
            runs.update(xs)
            ax.plot(xs, [_pct(p[1]) for p in pts], "o-", color=colour(si), label=f"{text(label)} accuracy")
            ax.plot(xs, [_pct(p[2]) for p in pts], "s--", color=colour(si), alpha=0.6,
                    markersize=4, label=f"{text(label)} strict")
        ax.set_xticks(sorted(runs), [f"run {r}" for r in sorted(runs)])
        ax.set_ylim(0, 100)
        ax.set_ylabel("percent")
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
        return to_svg(fig, name, title)


def trend(points: Sequence[tuple[str, str, str, float | None, float | None, float | None]],
          name: str, title: str) -> str:
    """Accuracy of every stored scorecard in batch order: ``points`` are (configuration name,
    version, batch time label, accuracy, low, high), oldest first; one line per configuration
    name, each point labelled with its version where the version changes."""
    with matplotlib.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.0))
        names = list(dict.fromkeys(p[0] for p in points))
        for si, label in enumerate(names):
            mine = [(i, p) for i, p in enumerate(points) if p[0] == label]
            xs = [i for i, _ in mine]
            ys = [_pct(p[3]) for _, p in mine]
            lo = [max(0.0, y - _pct(p[4])) if p[4] is not None else 0.0 for y, (_, p) in zip(ys, mine)]
            hi = [max(0.0, _pct(p[5]) - y) if p[5] is not None else 0.0 for y, (_, p) in zip(ys, mine)]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color=colour(si), capsize=3,
                        markersize=5, label=text(label))
            last = None
            for x, y, (_, p) in zip(xs, ys, mine):
                if p[1] != last:
                    ax.annotate(text(p[1]), (x, y), textcoords="offset points", xytext=(5, 5),
                                fontsize=7, color=colour(si))
                last = p[1]
        step = max(1, len(points) // 12)
        ticks = list(range(0, len(points), step))
        ax.set_xticks(ticks, [text(points[i][2]) for i in ticks], rotation=30, ha="right")
        ax.set_xlim(-0.5, len(points) - 0.5)
        ax.set_ylim(0, 105)
        ax.set_ylabel("accuracy, percent")
        ax.set_xlabel("batches, oldest first")
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
        return to_svg(fig, name, title)


def stacked_layers(categories: Sequence[str], parts: dict[str, list[int]], name: str, title: str) -> str:
    """Hostile cases per class, stacked by what stopped them (``parts[layer][i]``)."""
    with matplotlib.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.8 + 0.22 * len(categories)))
        left = [0] * len(categories)
        for layer, vals in parts.items():
            if not any(vals):
                continue
            ax.barh(range(len(categories)), vals, left=left, color=LAYER_COLOURS.get(layer, "#777777"),
                    label=text(layer), height=0.7)
            left = [a + b for a, b in zip(left, vals)]
        for i, total in enumerate(left):
            ax.text(total, i, f" {total}", va="center", fontsize=7)
        ax.set_yticks(range(len(categories)), [text(c) for c in categories])
        ax.invert_yaxis()
        ax.set_xlabel("hostile cases")
        ax.margins(x=0.08)
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=7, borderaxespad=0.4)
        return to_svg(fig, name, title)
