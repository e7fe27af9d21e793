"""Case-level metadata for the evaluation assets: the trail from a red number to the case.

Dagster shows ``MetadataValue.table`` as a sortable table on the materialization: the failing
cases on ``eval_grades``, the diagnoses on ``eval_diagnoses``, the newly failing and newly
passing cases on ``eval_gate``, with the worst regressions as Markdown (question, reference
SQL, each run's SQL). Text comes from the system under test and from data, so it is cut to a
length and put in code blocks or table cells, never into Markdown structure."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import dagster as dg
import duckdb

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.records import Diagnosis, Grade, load_records, SUCCESS_OUTCOMES
from sqleval_pipeline.textfiles import visible, write_atomically

#: rows per table (Dagster keeps metadata in its event log; the full lists are in the batch)
MAX_ROWS = 200
EXCERPT = 160
PASSING = SUCCESS_OUTCOMES


def excerpt(text: str | None, n: int = EXCERPT) -> str:
    """One line, at most ``n`` characters.

    >>> excerpt("SELECT a\\n  FROM t", 12)
    'SELECT a FR…'
    """
    if not text:
        return ""
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def pct(v: float | None) -> float | None:
    """A rate as a percentage rounded to 0.1 (what the UI shows and plots)."""
    return None if v is None else round(100 * v, 1)


def _answers(attempts: Path, case_ids: set[str]) -> dict[tuple[str, int], str]:
    """(case, run) → the SQL or the refusal, for the given cases only."""
    if not case_ids or not attempts.exists():
        return {}
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT case_id, run_index, kind, sql, refusal_reason, error_message "
            "FROM read_parquet(?) WHERE list_contains(?, case_id)",
            [str(attempts), sorted(case_ids)]).fetchall()
    finally:
        con.close()
    out = {}
    for cid, run, kind, sql, refusal, error in rows:
        out[(cid, run)] = (sql if kind == "sql" else
                           f"-- refused: {refusal or ''}" if kind == "refusal" else
                           f"-- generation error: {error or ''}")
    return out


def _table(rows: list[dict], columns: list[tuple[str, str, str]]) -> dg.MetadataValue:
    schema = dg.TableSchema(columns=[dg.TableColumn(name, type=kind, description=desc)
                                     for name, kind, desc in columns])
    return dg.MetadataValue.table(
        records=[dg.TableRecord({name: r.get(name) for name, _k, _d in columns})
                 for r in rows[:MAX_ROWS]], schema=schema)


def failing_cases(grades, folder: Path) -> dict[str, dg.MetadataValue]:
    """``failing_cases``: each case with a run that did not pass, worst first."""
    by_case = defaultdict(list)
    for g in grades:
        by_case[g.case_id].append(g)
    failing = {cid: sorted(gs, key=lambda g: g.run_index) for cid, gs in by_case.items()
               if any(str(g.outcome) not in PASSING for g in gs)}
    answers = _answers(folder / bf.ATTEMPTS, set(failing))
    rows = []
    for cid, gs in failing.items():
        bad = next(g for g in gs if str(g.outcome) not in PASSING)
        rows.append({
            "case_id": cid,
            "outcome": " · ".join(str(g.outcome) for g in gs),
            "passed_runs": f"{sum(str(g.outcome) in PASSING for g in gs)}/{len(gs)}",
            "band": bad.band, "difficulty": bad.difficulty, "split": bad.split,
            "mismatch": excerpt(bad.mismatch or bad.reason),
            "sql": excerpt(answers.get((cid, bad.run_index))),
            "_passed": sum(str(g.outcome) in PASSING for g in gs),
        })
    rows.sort(key=lambda r: (r["_passed"], r["case_id"]))
    columns = [("case_id", "string", "golden case"),
               ("outcome", "string", "outcome of each run, in run order"),
               ("passed_runs", "string", "runs that passed / runs"),
               ("band", "string", ""), ("difficulty", "string", ""), ("split", "string", ""),
               ("mismatch", "string", "the grader's explanation for the first failing run"),
               ("sql", "string", "the first failing run's answer (excerpt)")]
    return {"failing_cases": _table(rows, columns),
            "failing_case_count": len(rows), "case_count": len(by_case)}


def diagnosis_table(diagnoses, folder: Path) -> dict[str, dg.MetadataValue]:
    """``diagnoses``: per failed attempt, each judge's category and explanation."""
    answers = _answers(folder / bf.ATTEMPTS, {d.case_id for d in diagnoses})
    rows = [{"case_id": d.case_id, "run": d.run_index, "judge": d.judge,
             "category": str(d.category), "explanation": excerpt(d.explanation, 240),
             "sql": excerpt(answers.get((d.case_id, d.run_index)))}
            for d in sorted(diagnoses, key=lambda d: (d.case_id, d.run_index, d.judge))]
    columns = [("case_id", "string", ""), ("run", "int", "run index"),
               ("judge", "string", "rules or llm"), ("category", "string", "failure category"),
               ("explanation", "string", "why, in the judge's words"),
               ("sql", "string", "the answer (excerpt)")]
    return {"diagnoses_table": _table(rows, columns)}


def _pass_shares(grades) -> dict[str, float]:
    """case id -> share of its graded runs (ERROR excluded) that passed."""
    runs: dict[str, list[bool]] = defaultdict(list)
    for g in grades:
        if g.outcome is not None and str(g.outcome) != "ERROR":
            runs[g.case_id].append(str(g.outcome) in PASSING)
    return {cid: sum(v) / len(v) for cid, v in runs.items() if v}


def by_severity(failing_ids, now: dict[str, float], before: dict[str, float]) -> list[str]:
    """Newly failing cases, worst first: the share of runs failing now plus the share that
    passed before (a case that passed in every run and now fails in every run scores 2 and
    comes first); ties by case id. A case unknown to either batch counts 0 on that side.

    ``now`` and ``before`` are pass shares per case (see :func:`_pass_shares`).

    >>> by_severity({"a", "b", "c"}, now={"a": 1/3, "b": 0.0, "c": 0.0}, before={"a": 1.0, "b": 1/3, "c": 1.0})
    ['c', 'a', 'b']
    """
    def score(cid: str) -> float:
        return (1.0 - now.get(cid, 1.0)) + before.get(cid, 0.0)

    return sorted(failing_ids, key=lambda cid: (-score(cid), cid))


def gate_tables(report, env, folder: Path) -> dict[str, dg.MetadataValue]:
    """Newly failing / newly passing cases of every comparison, and the worst regressions."""
    cases = {c.id: c for c in env.cases}
    grades = defaultdict(list)
    if (folder / bf.GRADES).exists():
        for g in load_records(folder / bf.GRADES, Grade):
            grades[g.case_id].append(g)
    diags = defaultdict(list)
    if (folder / bf.DIAGNOSES).exists():
        for d in load_records(folder / bf.DIAGNOSES, Diagnosis):
            diags[(d.case_id, d.run_index)].append(d)
    failing_ids = {cid for c in report.comparisons for cid in c.newly_failing}
    answers = _answers(folder / bf.ATTEMPTS, failing_ids)

    def row(cid: str, kind: str, against: str) -> dict:
        gs = sorted(grades.get(cid, []), key=lambda g: g.run_index)
        bad = next((g for g in gs if str(g.outcome) not in PASSING), None)
        cats = sorted({d.category for g in gs for d in diags.get((cid, g.run_index), [])})
        return {"case_id": cid, "comparison": kind, "against": against,
                "question": excerpt(cases[cid].question if cid in cases else ""),
                "outcome": " · ".join(str(g.outcome) for g in gs),
                "diagnosis": ", ".join(map(str, cats)),
                "mismatch": excerpt(bad.mismatch or bad.reason) if bad else ""}

    newly_failing, newly_passing = [], []
    for c in report.comparisons:
        against = f"{c.baseline_partition} {c.baseline_batch or ''}".strip()
        newly_failing += [row(cid, c.kind, against) for cid in c.newly_failing]
        newly_passing += [row(cid, c.kind, against) for cid in c.newly_passing]
    columns = [("case_id", "string", ""), ("comparison", "string",
                                          "baseline | previous_version | previous_batch"),
               ("against", "string", "configuration version and batch compared with"),
               ("question", "string", ""), ("outcome", "string", "this batch, per run"),
               ("diagnosis", "string", "failure categories of this batch's runs"),
               ("mismatch", "string", "the grader's explanation")]
    before: dict[str, float] = {}
    for c in report.comparisons:  # the first comparison naming a case gives its "before"
        path = env.store.batch_dir(c.baseline_partition, c.baseline_batch) / bf.GRADES \
            if c.baseline_partition and c.baseline_batch and c.newly_failing else None
        if path is not None and path.exists():
            wanted = set(c.newly_failing) - before.keys()
            before.update({k: v for k, v in _pass_shares(
                g for g in load_records(path, Grade) if g.case_id in wanted).items()})
    worst = by_severity(failing_ids, _pass_shares(g for gs in grades.values() for g in gs), before)
    # the answers of the batch each newly failing case is compared with (the first comparison
    # naming the case), so the UI shows reference, previous and current SQL side by side
    previous: dict[tuple[str, int], str] = {}
    previous_of: dict[str, str] = {}
    for c in report.comparisons:
        wanted = set(c.newly_failing) - previous_of.keys()
        if wanted and c.baseline_partition and c.baseline_batch:
            theirs = _answers(env.store.batch_dir(c.baseline_partition, c.baseline_batch) / bf.ATTEMPTS,
                              wanted)
            previous.update(theirs)
            previous_of.update({cid: f"{c.baseline_partition} batch {c.baseline_batch}" for cid in wanted})

    def block(cid: str) -> str:
        case = cases.get(cid)
        parts = [f"### {cid}\n\n**Question**\n\n```text\n{_fence(case.question if case else '')}\n```\n\n"
                 f"**Reference SQL**\n\n```sql\n{_fence(case.reference_sql if case else '')}\n```"]
        before = sorted((run, sql) for (c, run), sql in previous.items() if c == cid)
        if before:
            parts.append(f"**Before** ({previous_of[cid]}), run {before[0][0]}\n\n```sql\n{_fence(before[0][1])}\n```")
        for g in sorted(grades.get(cid, []), key=lambda g: g.run_index):
            notes = [f"mismatch: {g.mismatch}"] if g.mismatch else []
            notes += [f"diagnosis ({d.judge}): {d.category} — {excerpt(d.explanation, 300)}"
                      for d in diags.get((cid, g.run_index), [])]
            parts.append(f"**Now, run {g.run_index}: {g.outcome}**\n\n```sql\n"
                         f"{_fence(answers.get((cid, g.run_index), ''))}\n```"
                         + (f"\n\n```text\n{_fence(chr(10).join(notes))}\n```" if notes else ""))
        return "\n\n".join(parts)

    title = (f"({len(failing_ids)} newly failing case(s), worst first: failing in more runs now and "
             "passing in more runs before)")
    md = [f"## Worst regressions {title}"] + [block(cid) for cid in worst[:5]]
    if not failing_ids:
        md.append("No case that passed before fails now.")
    extra = {}
    if failing_ids:  # every newly failing case in full, in a file the UI links
        path = folder / bf.REGRESSIONS
        write_atomically(path, visible("\n\n".join([f"# Newly failing cases {title}"]
                                                     + [block(cid) for cid in worst])) + "\n")
        extra["regressions_file"] = dg.MetadataValue.path(str(path))
    return {"newly_failing": _table(newly_failing, columns),
            "newly_passing": _table(newly_passing, columns),
            "worst_regressions": dg.MetadataValue.md(visible("\n\n".join(md))), **extra}


def _interval(ci) -> str:
    """``[28.0, 68.0] case-bs`` in points (empty: no interval)."""
    if ci is None or ci.low is None or ci.high is None:
        return ""
    return f"[{100 * ci.low:.1f}, {100 * ci.high:.1f}] {ci.tag}"


def scorecard_metadata(card) -> dict[str, object]:
    """The scorecard's headline for ``eval_scorecard``: each accuracy with its interval and
    the interval's method next to it, the clusters (and whether sqleval derived them), the
    design effect's method, and the execution-only cases with how to grade them.

    >>> from sqleval_pipeline.pipeline.records import Grade
    >>> from sqleval_pipeline.scoring.scorecard import build_scorecard
    >>> card = build_scorecard([Grade(config_version="c", case_id=f"q{i}", run_index=0,
    ...     outcome="CORRECT" if i % 2 else "WRONG", reason="x", grader_version="r",
    ...     band="answerable", difficulty="top_k", split="dev", cluster="general")
    ...     for i in range(6)], resamples=100)
    >>> scorecard_metadata(card)["accuracy interval method"]
    'case bootstrap (6 cases; 1 cluster < 20)'
    """
    o = card.overall
    meta: dict[str, object] = {}
    for name, r in (("accuracy", o.accuracy), ("strict_accuracy", o.strict_accuracy)):
        meta[f"{name} interval (95%)"] = _interval(r.ci) or "n/a"
        meta[f"{name} interval method"] = r.ci.method if r.ci is not None else "none: a rate over nothing"
    for split, m in sorted(card.by_split.items()):
        ci = m.accuracy.ci
        meta[f"accuracy_{split} interval (95%)"] = (
            f"{_interval(ci)} — {ci.method}" if ci is not None and ci.low is not None else "n/a")
    meta["interval methods"] = dg.MetadataValue.md("\n".join(f"- {line}" for line in card.interval_legend())
                                                   or "no interval")
    meta["clusters"] = card.cluster_note()
    meta["clusters derived"] = card.clusters_derived
    meta["design effect"] = f"{card.power.design_effect}: {card.power.design_effect_method}"
    meta["slices"] = (len(card.by_difficulty) + len(card.by_band) + len(card.by_tag)
                      + sum(len(v) for v in card.by_facet.values()))
    t = card.test_suite
    if t is None:
        meta["test suite"] = "not used: graded on the pinned snapshot alone"
    else:  # accuracy above is on the suite; what the snapshot alone says, beside it
        snap = t.snapshot_accuracy
        meta["accuracy on the snapshot alone (%)"] = pct(snap.value)
        meta["accuracy on the snapshot alone interval (95%)"] = _interval(snap.ci) or "n/a"
        meta["accidental matches"] = t.n_accidental
        meta["accidental match cases"] = dg.MetadataValue.json(t.accidental_cases)
        meta["test suite"] = (f"{t.suite}: {t.n_checked} answers right on the snapshot checked, "
                              f"{t.n_accidental} right by accident, {t.n_inconclusive} inconclusive, "
                              f"{t.n_no_suite} without a suite")
    note = card.execution_only_note()
    meta["execution-only cases"] = card.execution_only.n_cases
    if note:
        meta["execution-only"] = note
    return meta


def _fence(text: str | None) -> str:
    """Text safe inside a fenced block: a run of backticks cannot close the fence."""
    return (text or "").replace("```", "`\u200b``")
