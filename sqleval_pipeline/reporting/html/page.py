"""The report as one self-contained HTML page (docs/report.md).

Jinja2 renders the package's templates (``templates/*.html.j2``) with autoescaping on for
every value: questions, SQL, result cells and judges' explanations come from systems under
test and from data, and print as text. The stylesheet and the script (``static/``) are
inlined and named by their SHA-256 in the page's Content-Security-Policy, which allows
nothing else (no remote anything, no inline event handlers, no ``style`` attributes). The
case drill-down's data is one ``<script type="application/json">`` block in which ``<``,
``>`` and ``&`` are written as ``\\u003c``, ``\\u003e``, ``\\u0026``: no value can close the
block or open a comment, and the script inserts it with ``textContent`` only.

>>> str(script_json({"q": "</script><!--"}))
'{"q":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'

Every interval is followed by its method's tag, the full method in the tag's title:

>>> from sqleval_pipeline.scoring.scorecard import Interval
>>> str(interval(Interval(low=0.2, high=0.6, method="case bootstrap (9 cases; 1 cluster < 20)", kind="case")))
'[20.0, 60.0] <abbr class="method" title="case bootstrap (9 cases; 1 cluster &lt; 20)">case-bs</abbr>'
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from sqleval_pipeline.reporting.html import plots
from sqleval_pipeline.reporting.html.collect import Evaluation, ReportData
from sqleval_pipeline.reporting.html.evidence import LAYERS, Evidence, collect_evidence
from sqleval_pipeline.scoring.scorecard import (
    MAX_SLICE_VALUES, METHOD_TAGS, SliceMetrics, method_legend, ranked,
)
from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline.scoring.stats import MIN_CLUSTERS
from sqleval_pipeline.textfiles import visible, write_atomically

_PACKAGE = "sqleval_pipeline.reporting.html"


def script_json(obj: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` block that no value can break out of."""
    # ASCII JSON: controls, bidi overrides and lone surrogates travel as escapes
    text = json.dumps(obj, separators=(",", ":"), default=str)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return Markup(text)


def _static(name: str) -> str:
    return (files(_PACKAGE) / "static" / name).read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def pct(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{100 * v:.{digits}f}%"


def signed(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:+.1f}"


def method_tag(kind: str, method: str) -> Markup:
    """The method's tag (``case-bs``) with the full method as its title."""
    tag = METHOD_TAGS.get(kind, (kind, ""))[0]
    return Markup('<abbr class="method" title="{}">{}</abbr>').format(method, tag)


def interval(ci, signed_: bool = False) -> Markup:
    """``[41.8, 77.4] case-bs`` (the tag's title: the full method); empty without bounds."""
    if ci is None or ci.low is None or ci.high is None:
        return Markup("")
    f = "{:+.1f}" if signed_ else "{:.1f}"
    return Markup("[{}, {}] {}").format(f.format(100 * ci.low), f.format(100 * ci.high),
                                        method_tag(ci.kind, ci.method))


def rate(r) -> Markup:
    """``54.2% [41.8, 77.4] case-bs (96/177)``; ``n/a (0/0)`` for a rate over nothing."""
    if r is None:
        return Markup("n/a")
    if r.value is None:
        return Markup("n/a ({}/{})").format(r.num, r.den)
    ci = interval(r.ci)
    return Markup("{}{} ({}/{})").format(pct(r.value), Markup(" ") + ci if ci else "", r.num, r.den)


def _tags(rates) -> str:
    """The method tags of some rates' intervals, in METHOD_TAGS order (for a plot's axis)."""
    kinds = {r.ci.kind for r in rates if r is not None and r.ci is not None and r.ci.low is not None}
    return ", ".join(tag for k, (tag, _m) in METHOD_TAGS.items() if k in kinds) or "none"


def named_slices(evs: list[Evaluation]) -> list[tuple[str, list[SliceMetrics | None]]]:
    """Facet and tag rows of the slices table: (label, each evaluation's metrics or None),
    facets by name, values and tags by most cases (every slice a scorecard computed)."""
    rows: list[tuple[str, list[SliceMetrics | None]]] = []
    for facet in sorted({f for e in evs for f in e.card.by_facet}):
        merged: dict[str, SliceMetrics] = {}
        for e in evs:
            for k, m in e.card.by_facet.get(facet, {}).items():
                if k not in merged or m.n_cases > merged[k].n_cases:
                    merged[k] = m
        rows += [(f"{facet} {k}", [e.card.by_facet.get(facet, {}).get(k) for e in evs])
                 for k, _m in ranked(merged)]
    merged = {}
    for e in evs:
        for k, m in e.card.by_tag.items():
            if k not in merged or m.n_cases > merged[k].n_cases:
                merged[k] = m
    rows += [(f"tag {k}", [e.card.by_tag.get(k) for e in evs]) for k, _m in ranked(merged)]
    return rows


def _visible_value(value: Any) -> Any:
    """Every plain text printed into the page through :func:`~sqleval_pipeline.textfiles.visible`
    (markup the page builds itself is left as it is; its parts were escaped when it was built)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


@cache
def _jinja() -> jinja2.Environment:
    # finalize: every value printed shows controls, invisible formatting characters and lone
    # surrogates as escapes (a NUL or an RTL override in a system's SQL never reaches the page)
    env = jinja2.Environment(loader=jinja2.PackageLoader(_PACKAGE, "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=_visible_value)
    env.filters.update(pct=pct, signed=signed, interval=interval, rate=rate)
    env.globals.update(LAYERS=LAYERS, zip=zip, method_tag=method_tag, method_legend=method_legend,
                       MIN_CLUSTERS=MIN_CLUSTERS, MAX_SLICE_VALUES=MAX_SLICE_VALUES)
    return env


def _render(template: str, **context: Any) -> str:
    css, js = _static("report.css"), _static("report.js")
    csp = (f"default-src 'none'; script-src {csp_hash(js)}; style-src {csp_hash(css)}; "
           "img-src 'none'; font-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'")
    return _jinja().get_template(template).render(css=Markup(css), js=Markup(js), csp=csp, **context)


# --------------------------------------------------------------------------- figures


def _figures(data: ReportData) -> dict[str, str]:
    evs = data.evaluations
    keys = [e.key for e in evs]
    figs: dict[str, str] = {}

    def values(groups: dict[str, Any]) -> dict[str, dict[str, tuple]]:
        return {g: {e.key: (r.value, r.ci.low if r.ci else None, r.ci.high if r.ci else None)
                    for e, r in zip(evs, rates, strict=True) if r is not None}
                for g, rates in groups.items()}

    heads: dict[str, Any] = {}
    for label in ("heldout split", "dev split", "overall"):
        for metric in ("accuracy", "strict_accuracy"):
            rows = [next((getattr(s.metrics, metric) for s in e.splits if s.label == label), None)
                    for e in evs]
            heads[f"{label} — {metric.replace('_', ' ')}"] = rows
    figs["headline"] = plots.forest(list(heads), keys, values(heads), "headline",
                                    "Accuracy and strict accuracy per split",
                                    xlabel=f"percent (95% interval; {_tags(r for v in heads.values() for r in v)})")
    slices: dict[str, Any] = {}
    difficulties = list(dict.fromkeys(d for e in evs for d in e.card.by_difficulty))
    for d in difficulties:
        slices[f"difficulty {d}"] = [e.card.by_difficulty[d].accuracy if d in e.card.by_difficulty
                                     else None for e in evs]
    for b in dict.fromkeys(b for e in evs for b in e.card.by_band):
        slices[f"band {b}"] = [e.card.by_band[b].accuracy if b in e.card.by_band else None for e in evs]
    figs["slices"] = plots.forest(list(slices), keys, values(slices), "slices",
                                  "Accuracy by difficulty and band",
                                  xlabel=f"percent (95% interval; {_tags(r for v in slices.values() for r in v)})")
    refusal = {"deferral rate": [e.card.refusal.deferral_rate for e in evs],
               "over-refusal rate": [e.card.refusal.over_refusal_rate for e in evs],
               "refusal hold (should-refuse)": [e.card.refusal.refusal_hold for e in evs]}
    figs["refusal"] = plots.forest(list(refusal), keys, values(refusal), "refusal", "Refusals",
                                   xlabel=f"percent (95% interval; {_tags(r for v in refusal.values() for r in v)})")
    judged = [e for e in evs if e.card.failure_histogram]
    cats = sorted({c for e in judged for c in e.card.failure_histogram or {}})
    if cats:
        counts = {c: {e.key: (e.card.failure_histogram or {}).get(c, 0) for e in judged} for c in cats}
        figs["failures"] = plots.grouped_bars(cats, [e.key for e in judged], counts, "failures",
                                              "Failure categories")
    figs["stability"] = plots.per_run(
        {e.key: [(r.run_index, r.accuracy, r.strict_accuracy) for r in e.card.overall.per_run]
         for e in evs}, "stability", "Accuracy per run")
    if data.trend:
        points = [(p.config_name, p.version, p.created_at[:16].replace("T", " "), p.accuracy,
                   p.low, p.high) for p in data.trend]
        figs["trend"] = plots.trend(points, "trend", "Accuracy of every stored scorecard")
    for i, e in enumerate(evs):
        for j, view in enumerate(e.comparisons):
            d = view.diff
            if d is None:
                continue
            wanted = [m for m in d.metrics if m.metric in ("accuracy", "strict_accuracy")
                      and (m.slice == "overall" or m.slice.startswith("split:"))]
            groups = {f"{m.slice} {m.metric.replace('_', ' ')}": {"Δ": (
                m.delta, m.ci.low if m.ci else None, m.ci.high if m.ci else None)} for m in wanted}
            lim = max([0.05] + [abs(v) for m in wanted for v in (
                m.delta, m.ci.low if m.ci else None, m.ci.high if m.ci else None) if v is not None])
            figs[f"diff-{i}-{j}"] = plots.forest(
                list(groups), ["Δ"], groups, f"diff-{i}-{j}",
                f"{d.candidate_config} vs {d.baseline_config}: paired difference",
                xlabel=f"difference, points (95% paired interval; {_tags(wanted)})",
                xlim=(-105 * lim, 105 * lim), zero_line=True)
    g = data.evidence.guardrails
    if g is not None and g.categories:
        figs["guardrails"] = guard_figure(data.evidence)
    return figs


def guard_figure(ev: Evidence) -> str:
    g = ev.guardrails
    assert g is not None
    cats = [c.category for c in g.categories]
    parts = {layer: [c.by_layer.get(layer, 0) for c in g.categories] for layer in LAYERS}
    parts["sql error"] = [c.blocked_by_error for c in g.categories]
    parts["declined"] = [c.declined for c in g.categories]
    parts["got through"] = [c.got_through for c in g.categories]
    return plots.stacked_layers(cats, parts, "guardrails", "Hostile cases by class and stopping layer")


# --------------------------------------------------------------------------- cases


def _case_rows(evs: list[Evaluation]) -> tuple[list[dict], list[dict]]:
    """The drill-down table's rows and the script's data (same order, same index)."""
    rows, payload = [], []
    for e in evs:
        verdicts = {c.case_id: c for c in e.card.cases}
        for d in e.cases:
            result = verdicts.get(d.case.id)
            verdict = ("ungraded" if result is None or result.passed is None else
                       "flips" if result.flipped else "passes" if result.passed else "fails")
            outcomes = [r.grade.outcome or "UNGRADED" if r.grade else "UNGRADED" for r in d.runs]
            cats = sorted({x.category for r in d.runs for x in r.diagnoses})
            guard = sorted({f"{r.execution.layer}:{r.execution.reason}" for r in d.runs
                            if r.execution is not None and r.execution.status == "refused"})
            rows.append({"i": len(rows), "key": e.key, "case": d.case, "verdict": verdict,
                         "outcomes": outcomes, "diagnoses": cats, "guard": guard})
            payload.append(d.model_dump(mode="json", exclude={"format"}))
    return rows, payload


def render_report(data: ReportData) -> str:
    rows, payload = _case_rows(data.evaluations)
    options = {name: sorted({str(v) for r in rows for v in values(r)}) for name, values in (
        ("config", lambda r: [r["key"]]), ("outcome", lambda r: r["outcomes"]),
        ("verdict", lambda r: [r["verdict"]]), ("band", lambda r: [r["case"].band]),
        ("difficulty", lambda r: [r["case"].difficulty]), ("split", lambda r: [r["case"].split]),
        ("diagnosis", lambda r: r["diagnoses"] or ["none"]))}
    difficulties = list(dict.fromkeys(d for e in data.evaluations for d in e.card.by_difficulty))
    return _render("report.html.j2", data=data, figs=_figures(data), rows=rows, options=options,
                   difficulties=difficulties, named_slices=named_slices(data.evaluations),
                   payload=script_json(payload), ev=data.evidence,
                   failure_categories=sorted({c for e in data.evaluations
                                              for c in e.card.failure_histogram or {}}))


def render_evidence(ev: Evidence) -> str:
    fig = guard_figure(ev) if ev.guardrails is not None and ev.guardrails.categories else None
    return _render("evidence.html.j2", ev=ev, guard_fig=fig, payload=script_json([]))


def write_evidence(env: Environment, out_path: Path) -> Path:
    """The evidence pack as one self-contained HTML file at ``out_path``."""
    write_atomically(Path(out_path), render_evidence(collect_evidence(env)))
    return Path(out_path)
