"""A pull-request comment for an evaluated batch (``sqleval run --summary FILE.md``,
docs/ci.md): the gate's verdict first, then the newly failing cases, accuracy with its 95%
interval per configuration, the comparisons and the SQL of the newly failing runs.

The text always fits a GitHub comment (65,536 characters; measured here in UTF-8 bytes, which
are never fewer): what does not fit is cut at a whole line and counted ("… and N more"), with
a pointer to the full report. Untrusted text — SQL, a model's refusal, a grader's mismatch
quoting result values, a judge's explanation — cannot break the Markdown: inline it is one
line with Markdown and HTML punctuation escaped (and ``@`` kept from mentioning anyone); SQL
is in a fenced block longer than any backtick run it holds. No control character or lone
surrogate reaches the file raw.

>>> inline("a|b *c* <b>@x $1$ me@host")
'a\\\\|b \\\\*c\\\\* &lt;b&gt;@&#8203;x \\\\$1\\\\$ me@host'
>>> fence("SELECT '```'").splitlines()[0]
'````sql'
"""

from __future__ import annotations

import html
import re

from sqleval_pipeline.reporting.ci_batch import (
    AGGREGATION_RULE,
    BatchResults,
    CaseView,
    ComparisonView,
    clip,
    diagnosis_text,
    first_failure,
    one_line,
    runs_text,
)
from sqleval_pipeline.textfiles import visible

#: GitHub's limit on a comment's body
MAX_SIZE = 65_536
#: SQL blocks shown at most (each in its own collapsed section)
MAX_SQL_BLOCKS = 10
SQL_CHARS = 3000
_LABEL = {"passed": "PASSED", "failed": "FAILED", "not gated": "not gated", "inconclusive": "INCONCLUSIVE"}
_PUNCT = re.compile(r"([\\`*_\[\]|~#!$<>])")
#: an ``@`` GitHub could read as a mention (not preceded by a letter or digit, as in an address)
_MENTION = re.compile(r"(?<![0-9A-Za-z])@")


def size(text: str) -> int:
    """The length GitHub's limit is checked against here: UTF-8 bytes."""
    return len(text.encode("utf-8", "backslashreplace"))


def inline(text: object, limit: int | None = None) -> str:
    """Untrusted text for a table cell or a sentence: one line, clipped to ``limit``
    characters, Markdown punctuation backslash-escaped, ``&``/``<``/``>`` as entities, and a
    zero-width space (as an entity) after an ``@`` that could mention someone."""
    s = one_line(text)
    if limit is not None:
        s = clip(s, limit)
    s = s.replace("&", "&amp;")
    s = _PUNCT.sub(lambda m: {"<": "&lt;", ">": "&gt;"}.get(m.group(1), "\\" + m.group(1)), s)
    return _MENTION.sub("@&#8203;", s)


def code(text: object) -> str:
    """A short identifier (case id, configuration version) as inline code, or as escaped text
    when it holds a backtick or a pipe."""
    s = one_line(text)
    if not s or "`" in s or "|" in s:
        return inline(s)
    return f"`{s}`"


def fence(text: str, lang: str = "sql") -> str:
    """``text`` in a fenced code block whose fence is longer than any backtick run inside."""
    s = visible(text).replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{s}\n{ticks}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def rate_cell(rate) -> str:
    """``54.2% (96/177) [40.7–77.4%, cluster-bs]``"""
    if rate is None:
        return "–"
    if rate.value is None:
        return f"n/a ({rate.num}/{rate.den})"
    out = f"{_pct(rate.value)} ({rate.num}/{rate.den})"
    ci = rate.ci
    if ci is not None and ci.low is not None and ci.high is not None:
        out += f" [{100 * ci.low:.1f}–{100 * ci.high:.1f}%, {inline(ci.tag)}]"
    else:
        out += " (no interval)"
    return out


def _delta_cell(view: ComparisonView) -> str:
    c = view.comparison
    if c.delta is None:
        return "–"
    out = f"{100 * c.delta:+.1f}"
    try:
        ci = view.diff.metric("accuracy").ci if view.diff is not None else None
    except KeyError:
        ci = None
    if ci is not None and ci.low is not None and ci.high is not None:
        out += f" [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}, {inline(ci.tag)}]"
    return out


# --------------------------------------------------------------------------- sections


def _head(r: BatchResults) -> list[str]:
    label = _LABEL.get(r.status, r.status)
    failing = [c for c in r.cases if c.verdict == "fails"]
    errors = [c for c in r.cases if c.verdict == "error"]
    line = (f"**Regression gate {inline(label)}** for {code(r.partition_key)}, batch "
            f"{code(r.batch.batch_id)}: {inline(r.gate_summary, 1500)}")
    cases = (f"{len(failing)} of {len(r.cases)} cases fail (the majority of their graded runs)"
             + (f"; {len(errors)} got no answer in any run (ERROR)" if errors else "") + ".")
    return [f"## sqleval: gate {inline(label)} — {code(r.partition_key)}", "", line, "", cases, ""]


def _case_row(r: BatchResults, case: CaseView | None, case_id: str) -> str:
    if case is None:
        return f"| {code(case_id)} | – | – | – | not in this batch's scorecard |"
    where = inline(f"{case.file}:{case.line}") if case.file else "not in the golden set now"
    failing = case.failing_runs
    why = first_failure(failing[0], 300) if failing else case.verdict
    return (f"| {code(case_id)} | {where} | {inline(runs_text(case), 300)} | "
            f"{inline(diagnosis_text(case), 200) or '–'} | {inline(why, 300)} |")


def _accuracy(r: BatchResults) -> list[str]:
    out = ["### Accuracy (95% intervals)", "",
           "| configuration | role | accuracy | strict accuracy | cases |", "|---|---|---|---|---|",
           f"| {code(r.partition_key)} | this batch | {rate_cell(r.card.overall.accuracy)} | "
           f"{rate_cell(r.card.overall.strict_accuracy)} | {r.card.n_cases} |"]
    seen = set()
    for v in r.comparisons:
        c = v.comparison
        if c.status == "skipped" or (c.baseline_partition, c.baseline_batch) in seen:
            continue
        seen.add((c.baseline_partition, c.baseline_batch))
        role = inline(v.label + (f" (batch {c.baseline_batch})" if c.kind == "previous_batch" else ""))
        if v.baseline_card is not None:
            card = v.baseline_card
            out.append(f"| {code(c.baseline_partition)} | {role} | {rate_cell(card.overall.accuracy)} | "
                       f"{rate_cell(card.overall.strict_accuracy)} | {card.n_cases} |")
        else:
            out.append(f"| {code(c.baseline_partition)} | {role} | {_pct(c.baseline_accuracy)} "
                       "(interval not stored) | – | – |")
    return out + [""]


def _comparisons(r: BatchResults) -> list[str]:
    if not r.comparisons:
        return ["### Comparisons", "", "No comparison was recorded for this batch.", ""]
    out = ["### Comparisons", "",
           "| comparison | against | status | accuracy | Δ points [95% interval] | newly failing | newly passing |",
           "|---|---|---|---|---|---|---|"]
    for v in r.comparisons:
        c = v.comparison
        against = code(c.baseline_partition) if c.baseline_partition else "–"
        if c.status == "skipped":
            out.append(f"| {inline(v.label)} | {against} | not evaluated: {inline(c.reason, 300)} "
                       "| – | – | – | – |")
            continue
        out.append(f"| {inline(v.label)} | {against} | {inline(c.status)} | {_pct(c.baseline_accuracy)} → "
                   f"{_pct(c.candidate_accuracy)} | {_delta_cell(v)} | {len(c.newly_failing)} | "
                   f"{len(c.newly_passing)} |")
    return out + [""]


def _sql_block(case: CaseView) -> str | None:
    run = next((x for x in case.failing_runs if x.sql), None)
    if run is None:
        return None
    title = _MENTION.sub("@&#8203;", html.escape(one_line(f"{case.case_id}: run {run.run_index} "
                                                         f"({run.outcome})")))
    return "\n".join([f"<details><summary>{title}</summary>", "", fence(clip(run.sql, SQL_CHARS)), "",
                      "</details>", ""])


# --------------------------------------------------------------------------- the whole


def pr_summary(results: BatchResults, *, pointer: str | None = None, limit: int = MAX_SIZE) -> str:
    """The Markdown summary of a batch, at most ``limit`` bytes (:func:`size`). ``pointer``:
    where the full report is, as Markdown (default: the batch's ``report.html``)."""
    r = results
    if pointer is None:
        pointer = (f"full report: {code(str(r.report_html))}" if r.report_html is not None
                   else "full report: run `sqleval report`")
    head = _head(r)
    ids = r.newly_failing
    if ids:
        nf_head = [f"### Newly failing cases ({len(ids)})", "",
                   "| case | golden file | runs | diagnosis | first failure |", "|---|---|---|---|---|"]
    else:
        none = ("none" if r.comparisons and any(v.comparison.status != "skipped" for v in r.comparisons)
                else "none (nothing to compare with)")
        nf_head = ["### Newly failing cases", "", none]
    tail = _accuracy(r) + _comparisons(r)
    footer = ["---", f"{pointer} · aggregation over runs: {inline(AGGREGATION_RULE)}", ""]
    reserve = 400  # the "… and N more" lines

    def joined(*parts: list[str]) -> str:
        return "\n".join(line for part in parts for line in part)

    fixed = size(joined(head, nf_head, [""], tail, footer)) + reserve
    rows: list[str] = []
    budget = limit - fixed
    for case_id in ids:
        row = _case_row(r, r.case(case_id), case_id)
        if size(row) + 1 > budget:
            break
        rows.append(row)
        budget -= size(row) + 1
    more = len(ids) - len(rows)
    nf = nf_head + rows + (["", f"… and {more} more newly failing cases ({pointer})"] if more else []) + [""]
    sql: list[str] = []
    blocks = [b for b in (_sql_block(r.case(i)) for i in ids if r.case(i) is not None) if b]
    if blocks:
        header = ["### SQL of the newly failing runs (first failing run of each case)", ""]
        budget = limit - size(joined(head, nf, tail, footer, header)) - reserve
        shown = []
        for b in blocks[:MAX_SQL_BLOCKS]:
            if size(b) + 1 > budget:
                break
            shown.append(b)
            budget -= size(b) + 1
        if shown:
            left = len(blocks) - len(shown)
            sql = header + shown + ([f"… and {left} more ({pointer})", ""] if left else [])
    text = joined(head, nf, tail, sql, footer)
    if size(text) > limit:  # a safety net: the sections are budgeted above
        text = joined(head, nf, tail, footer)
    return clamp(text, limit, pointer)


def clamp(text: str, limit: int, pointer: str) -> str:
    """``text`` whole when it fits ``limit`` bytes, else cut at a line end with a last line
    saying so."""
    if size(text) <= limit:
        return text
    note = f"\n\n… cut to fit a comment ({pointer})\n"
    room = max(0, limit - size(note))
    cut = text.encode("utf-8", "backslashreplace")[:room].decode("utf-8", "ignore")
    return (cut[: cut.rfind("\n")] if "\n" in cut else "") + note
