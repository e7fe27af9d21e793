"""Console (rich) and Markdown renderings of scorecards, diffs and gate results.

>>> from sqleval_pipeline.pipeline.records import Grade
>>> from sqleval_pipeline.scoring.scorecard import build_scorecard
>>> sc = build_scorecard([Grade(config_version="c1", case_id="q1", run_index=0, outcome="CORRECT",
...     reason="match", grader_version="r1", band="answerable", difficulty="top_k", split="dev",
...     cluster="c")], resamples=50)
>>> "| overall |" in scorecard_markdown(sc)
True
>>> fmt_rate(sc.overall.accuracy)  # every interval carries its method's tag
'100.0% [20.7, 100.0] Wilson (1/1)'
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sqleval_pipeline.scoring.diff import Diff
from sqleval_pipeline.scoring.gate import GateResult
from sqleval_pipeline.scoring.scorecard import Interval, Rate, Scorecard, SliceMetrics, method_legend, ranked
from sqleval_pipeline.scoring.usage import usage_lines
from sqleval_pipeline.textfiles import visible_text

#: facet values and tags listed per scorecard rendering (most cases first; scorecard.json
#: and the HTML report have every computed slice)
RENDER_SLICES = 12


def pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}%"


def fmt_interval(ci: Interval | None, signed: bool = False) -> str:
    """``[40.0, 80.0] case-bs``: the bounds in points and the method's tag (empty: none)."""
    if ci is None or ci.low is None or ci.high is None:
        return ""
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"[{f.format(100 * ci.low)}, {f.format(100 * ci.high)}] {ci.tag}"


def fmt_rate(r: Rate | None) -> str:
    if r is None or r.value is None:
        return "n/a" + (f" (0/{r.den})" if r is not None and r.den == 0 else "")
    ci = fmt_interval(r.ci)
    return f"{pct(r.value)}{' ' + ci if ci else ''} ({r.num}/{r.den})"


def _named_rows(sc: Scorecard) -> tuple[list[tuple[str, SliceMetrics]], list[str]]:
    """Facet and tag rows (at most RENDER_SLICES each) and what was left out of them."""
    rows, left = [], []
    for facet, values in sorted(sc.by_facet.items()):
        shown = ranked(values)
        rows += [(f"{facet} {k}", v) for k, v in shown[:RENDER_SLICES]]
        more = len(shown) - RENDER_SLICES + sc.slices_omitted.get(f"facet:{facet}", 0)
        if more > 0:
            left.append(f"{more} more value(s) of facet {facet}")
    tags = ranked(sc.by_tag)
    rows += [(f"tag {k}", v) for k, v in tags[:RENDER_SLICES]]
    more = len(tags) - RENDER_SLICES + sc.slices_omitted.get("tags", 0)
    if more > 0:
        left.append(f"{more} more tag(s)")
    if sc.slices_omitted.get("facets"):
        left.append(f"{sc.slices_omitted['facets']} more facet(s)")
    return rows, left


def _slice_rows(sc: Scorecard) -> list[tuple[str, SliceMetrics]]:
    overall = "overall"
    if sc.overall.n_cases == 0 and sc.execution_only.n_cases:
        overall = f"overall (no graded case; {sc.execution_only.n_cases} execution-only)"
    rows = [(overall, sc.overall)]
    rows += [(f"split {k}" + (" (tuned)" if (sc.tuned and k == "dev")
                                or (sc.tuned_heldout and k == "heldout") else ""), v)
             for k, v in sc.by_split.items()]
    rows += [(f"band {k}", v) for k, v in sc.by_band.items()]
    rows += [(f"difficulty {k}", v) for k, v in sc.by_difficulty.items()]
    rows += _named_rows(sc)[0]
    return rows


def interval_lines(sc: Scorecard) -> list[tuple[str, str]]:
    """The interval methods used, the clusters (derived or declared) and omitted slices."""
    lines = [("intervals (95%)", m) for m in sc.interval_legend()]
    lines.append(("clusters", sc.cluster_note()))
    left = _named_rows(sc)[1]
    if left:
        lines.append(("slices not listed", "; ".join(left) + " (by most cases; scorecard.json and "
                      "the HTML report have every computed slice)"))
    return lines


def _clusters(m: SliceMetrics) -> str:
    return "?" if m.n_clusters is None else str(m.n_clusters)


def suite_lines(sc: Scorecard) -> list[tuple[str, str]]:
    """Suite accuracy beside snapshot accuracy (docs/test-suite.md), or why there is none."""
    t = sc.test_suite
    if t is None:
        return [("test suite", "not used: graded on the pinned snapshot alone")]
    cases = (f" (cases {', '.join(t.accidental_cases[:10])}{' …' if len(t.accidental_cases) > 10 else ''})"
             if t.accidental_cases else "")
    extra = "".join([f"; {t.n_no_suite} without a suite" if t.n_no_suite else "",
                     f"; {t.n_inconclusive} inconclusive" if t.n_inconclusive else ""])
    return [("accuracy on the snapshot alone", fmt_rate(t.snapshot_accuracy)),
            (f"accuracy on the test suite ({t.suite})", fmt_rate(t.suite_accuracy)),
            ("accidental matches (right on the snapshot only)",
             f"{t.n_accidental} of {t.n_checked} checked{cases}{extra}")]


def _summary_lines(sc: Scorecard) -> list[tuple[str, str]]:
    lines = [
        *suite_lines(sc),
        ("deferral rate", fmt_rate(sc.refusal.deferral_rate)),
        ("over-refusal rate", fmt_rate(sc.refusal.over_refusal_rate)),
        ("refusal hold (should-refuse)", fmt_rate(sc.refusal.refusal_hold)),
        ("should-refuse answered, guard blocked", str(sc.refusal.should_refuse_guard_blocked)),
        ("case-flip rate", fmt_rate(sc.case_flip_rate)),
        ("errors (outside the denominator)", f"{sc.errors.count}" + (
            " — " + ", ".join(f"{k}: {v}" for k, v in sc.errors.by_reason.items()) if sc.errors.by_reason else "")),
        ("execution-only (unverified cases)", fmt_rate(sc.execution_only.executed_ok)
         + (f" — {sc.execution_only_note()}" if sc.execution_only_note() else "")),
        *usage_lines(sc.usage),
        *([("vendor's own rows", sc.vendor_rows.line())] if sc.vendor_rows is not None else []),
        ("power", sc.power.verdict),
        ("cases needed (3/5/10 points)", ", ".join(
            f"{r.difference_points}pt: {r.cases_needed_clustered}" for r in sc.power.rows)
         + f" (discordance {sc.power.discordance:.3f}, {sc.power.discordance_source}; design effect "
           f"{sc.power.design_effect}: {sc.power.design_effect_method})"),
    ]
    if sc.failure_histogram is not None:
        judge = sc.failure_histogram_judge + (f"; {sc.failure_histogram_calibration}"
                                               if sc.failure_histogram_calibration else "")
        lines.append((f"failure categories ({judge})",
                      ", ".join(f"{k}: {v}" for k, v in sc.failure_histogram.items()) or "none"))
    return lines


def render_scorecard(sc: Scorecard, console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title=f"Scorecard {sc.config_version} — grader {sc.grader_version}, snapshot {sc.snapshot_id}"
              + (" — TUNED" if sc.tuned else ""))
    for col in ("slice", "cases", "clusters", "attempts", "accuracy [95%] method", "strict [95%] method",
                "mean over runs", "spread"):
        t.add_column(col, justify="left" if col == "slice" else "right")
    for name, m in _slice_rows(sc):
        t.add_row(escape(name), str(m.n_cases), _clusters(m), str(m.n_attempts), fmt_rate(m.accuracy),
                  fmt_rate(m.strict_accuracy), pct(m.mean_over_runs), pct(m.spread, signed=False))
    console.print(t)
    s = Table(show_header=False)
    s.add_column("metric")
    s.add_column("value")
    for k, v in [*interval_lines(sc), *_summary_lines(sc)]:
        s.add_row(k, escape(v))
    console.print(s)
    for n in sc.notes:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")


def _md(text: str) -> str:
    """A table cell: a pipe would end it."""
    return text.replace("|", "\\|")


@visible_text
def scorecard_markdown(sc: Scorecard) -> str:
    out = [f"## Scorecard `{sc.config_version}`" + (" (tuned)" if sc.tuned else ""), ""]
    if sc.inconclusive:
        out += [f"**Inconclusive:** {sc.errors.count} of {sc.attempts_total} attempts are ERROR "
                f"({100 * (sc.error_share or 0):.0f}%): a provider outage or a harness fault, not answers. "
                "No gate passes on this batch; run the same configuration again to retry them.", ""]
    out += [
           f"Grader `{sc.grader_version}`, snapshot `{sc.snapshot_id}`, runs {sc.runs}, "
           f"{sc.n_cases} cases, {sc.n_attempts} attempts. Intervals: 95% {sc.bootstrap.method}; "
           f"{sc.cluster_note()} (seed {sc.bootstrap.seed}, {sc.bootstrap.resamples} resamples). "
           "Each interval is followed by the tag of its method (rows *intervals* below).", "",
           "| slice | cases | clusters | attempts | accuracy [95%] method | strict [95%] method | mean over runs | spread |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in _slice_rows(sc):
        out.append(f"| {_md(name)} | {m.n_cases} | {_clusters(m)} | {m.n_attempts} | {fmt_rate(m.accuracy)} | "
                   f"{fmt_rate(m.strict_accuracy)} | {pct(m.mean_over_runs)} | {pct(m.spread)} |")
    out += ["", "| metric | value |", "|---|---|"]
    out += [f"| {k} | {_md(v)} |" for k, v in [*interval_lines(sc), *_summary_lines(sc)]]
    if sc.notes:
        out += [""] + [f"- note: {n}" for n in sc.notes]
    return "\n".join(out) + "\n"


def _ci(m) -> str:
    return fmt_interval(m.ci, signed=True) or "n/a"


def diff_legend(d: Diff) -> list[str]:
    """The paired interval methods a diff uses (its overall accuracy's method in full)."""
    overall = next((m.ci for m in d.metrics if m.metric == "accuracy" and m.slice == "overall"), None)
    return method_legend([m.ci for m in d.metrics if m.ci is not None and m.ci.low is not None],
                         overall if overall is not None and overall.low is not None else None)


def render_diff(d: Diff, console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title=f"Diff {d.baseline_config} → {d.candidate_config} ({d.n_paired_cases} paired cases)"
              + (" — RE-BASED" if d.rebased else ""))
    for col in ("metric", "slice", "baseline", "candidate", "Δ points", "95% interval (paired) method"):
        t.add_column(col)
    for m in d.metrics:
        t.add_row(m.metric, escape(m.slice), pct(m.baseline), pct(m.candidate), pct(m.delta, signed=True), _ci(m))
    console.print(t)
    for line in diff_legend(d):
        console.print(f"interval: {escape(line)}")
    console.print(f"newly failing ({len(d.newly_failing)}): {', '.join(d.newly_failing) or '-'}")
    console.print(f"newly passing ({len(d.newly_passing)}): {', '.join(d.newly_passing) or '-'}")
    console.print(f"still failing ({len(d.still_failing)}): {', '.join(d.still_failing) or '-'}")
    mc = d.mcnemar
    console.print(f"McNemar exact (per case): {mc.pass_to_fail} pass→fail, {mc.fail_to_pass} fail→pass, "
                  f"p = {mc.p_value:.4f}")
    console.print(f"power: {escape(d.power.verdict)} (design effect {d.power.design_effect}: "
                  f"{escape(d.power.design_effect_method)})")
    if d.histogram_shift:
        console.print("failure histogram shift: " + ", ".join(
            f"{h.category} {h.baseline}→{h.candidate}" for h in d.histogram_shift))
    for n in d.notes:
        console.print(f"[yellow]note:[/yellow] {n}")


@visible_text
def diff_markdown(d: Diff) -> str:
    out = [f"## Diff `{d.baseline_config}` → `{d.candidate_config}`" + (" (re-based)" if d.rebased else ""), "",
           f"{d.n_paired_cases} paired cases; grader `{d.candidate_grader_version}`.", "",
           "Paired intervals, each followed by its method: " + ("; ".join(diff_legend(d)) or "none") + ".", "",
           "| metric | slice | baseline | candidate | Δ points | 95% interval (paired) method |",
           "|---|---|---:|---:|---:|---:|"]
    for m in d.metrics:
        out.append(f"| {m.metric} | {_md(m.slice)} | {pct(m.baseline)} | {pct(m.candidate)} | "
                   f"{pct(m.delta, signed=True)} | {_ci(m)} |")
    mc = d.mcnemar
    out += ["",
            f"- newly failing ({len(d.newly_failing)}): {', '.join(d.newly_failing) or '-'}",
            f"- newly passing ({len(d.newly_passing)}): {', '.join(d.newly_passing) or '-'}",
            f"- still failing ({len(d.still_failing)}): {', '.join(d.still_failing) or '-'}",
            f"- McNemar exact (per case): {mc.pass_to_fail} pass→fail, {mc.fail_to_pass} fail→pass, "
            f"p = {mc.p_value:.4f}",
            f"- power: {d.power.verdict} (design effect {d.power.design_effect}: {d.power.design_effect_method})"]
    if d.histogram_shift:
        out.append("- failure histogram shift: " + ", ".join(
            f"{h.category} {h.baseline}→{h.candidate} ({h.delta:+d})" for h in d.histogram_shift))
    out += [f"- note: {n}" for n in d.notes]
    return "\n".join(out) + "\n"


def _threshold_lines(r: GateResult) -> list[str]:
    """One line per limit of the gate: ``max_p95_latency_s: passed — p95 latency …``."""
    return [f"{t.name}: {t.status.replace('_', ' ')} — {t.message}" for t in r.thresholds]


def render_gate(r: GateResult, console: Console | None = None) -> None:
    console = console or Console()
    style = "green" if r.passed else "red"
    console.print(f"[{style}]{escape(r.message)}[/{style}]")
    console.print(f"accuracy {pct(r.baseline_accuracy)} → {pct(r.candidate_accuracy)} ({pct(r.delta, signed=True)} points)")
    for line in _threshold_lines(r):
        console.print(f"limit {escape(line)}")


@visible_text
def gate_markdown(r: GateResult) -> str:
    status = "PASSED" if r.passed else "FAILED"
    limits = "".join(f"- limit {line}\n" for line in _threshold_lines(r))
    return (f"## Regression gate: {status}\n\n{r.message}\n\n"
            f"accuracy {pct(r.baseline_accuracy)} → {pct(r.candidate_accuracy)} "
            f"({pct(r.delta, signed=True)} points)\n" + (f"\n{limits}" if limits else ""))
