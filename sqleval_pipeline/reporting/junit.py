"""JUnit XML of an evaluated batch (``sqleval run --junit``) and of a hostile-suite run
(``sqleval guardrails run --junit``), the test-report format Jenkins, GitLab, Azure DevOps
and the GitHub test-report actions read (docs/ci.md).

The files validate against both schemas CI systems are built on: the Jenkins xUnit plugin's
``junit-10.xsd`` and the Apache Ant schema (``JUnit.xsd``). So a ``<testsuites>`` root
without attributes; each ``<testsuite>`` with ``name``, ``package``, ``id``, ``tests``,
``failures``, ``errors``, ``skipped``, ``time``, ``timestamp`` (UTC, no zone) and
``hostname``, then ``<properties>``, the test cases, ``<system-out>`` and ``<system-err>``;
each ``<testcase>`` with ``classname``, ``name``, ``time`` and at most one of ``<failure>``,
``<error>`` or ``<skipped>``. The counts are those of the test cases written.

Every text goes through :func:`xml_safe` first: XML 1.0 cannot carry NUL, most C0 controls,
lone surrogates or U+FFFE/U+FFFF, whatever a system under test wrote.

>>> xml_safe("a" + chr(0) + "b" + chr(0xD800) + chr(0xFFFF) + "\\r\\nc")
'a\\\\u0000b\\\\ud800\\\\uffff\\nc'
"""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqleval_pipeline.reporting.ci_batch import (
    AGGREGATION_RULE,
    BatchResults,
    CaseView,
    ComparisonView,
    case_summary,
    clip,
    one_line,
    run_details,
)
from sqleval_pipeline.textfiles import visible

#: longest ``message`` attribute, in characters (the body carries the rest)
MESSAGE_CHARS = 1000
#: longest text of one stored field (SQL, mismatch, explanation) in a body
FIELD_CHARS = 2000
_NOT_XML = re.compile("[\ufffe\uffff]")


def xml_safe(text: Any) -> str:
    """``text`` as XML 1.0 can carry it: controls (tab and line feed excepted), invisible
    formatting characters, lone surrogates and the two non-characters written as their
    ``\\uXXXX`` escape; every line break made a line feed."""
    out = visible("" if text is None else str(text))
    out = _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out.replace("\r\n", "\n").replace("\r", "\n")


def _token(text: Any, default: str) -> str:
    """An attribute the schemas read as a token (names, class names, hostname): one line,
    never blank."""
    return " ".join(xml_safe(text).split()) or default


def _timestamp(value: str | dt.datetime | None) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC (the schemas' timestamp: no zone, no fraction)."""
    if value is None:
        when = dt.datetime.now(dt.timezone.utc)
    elif isinstance(value, dt.datetime):
        when = value
    else:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            when = dt.datetime.now(dt.timezone.utc)
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"


# --------------------------------------------------------------------------- the model


@dataclass
class JUnitCase:
    classname: str
    name: str
    seconds: float = 0.0
    kind: str | None = None  # None (passed), "failure", "error", "skipped"
    type: str = ""
    message: str = ""
    body: str = ""


@dataclass
class JUnitSuite:
    name: str
    package: str
    cases: list[JUnitCase] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    timestamp: str = ""
    hostname: str = "localhost"

    def count(self, kind: str) -> int:
        return sum(1 for c in self.cases if c.kind == kind)


def render(suites: Sequence[JUnitSuite]) -> str:
    """The XML document of ``suites`` (UTF-8 declaration, two-space indentation)."""
    root = ET.Element("testsuites")
    for i, s in enumerate(suites):
        el = ET.SubElement(root, "testsuite", {
            "name": _token(s.name, "sqleval"), "package": _token(s.package, "sqleval"),
            "id": str(i), "tests": str(len(s.cases)), "failures": str(s.count("failure")),
            "errors": str(s.count("error")), "skipped": str(s.count("skipped")),
            "time": _seconds(sum(c.seconds for c in s.cases)),
            "timestamp": s.timestamp or _timestamp(None), "hostname": _token(s.hostname, "localhost")})
        props = ET.SubElement(el, "properties")
        for name, value in s.properties:
            ET.SubElement(props, "property", {"name": _token(name, "property"), "value": xml_safe(value)})
        for c in s.cases:
            tc = ET.SubElement(el, "testcase", {"classname": _token(c.classname, "sqleval"),
                                                "name": _token(c.name, "unnamed"),
                                                "time": _seconds(c.seconds)})
            if c.kind is not None:
                child = ET.SubElement(tc, c.kind, {"message": xml_safe(clip(c.message, MESSAGE_CHARS))}
                                      | ({"type": xml_safe(c.type)} if c.kind != "skipped" else {}))
                child.text = xml_safe(c.body) if c.body else None
        ET.SubElement(el, "system-out").text = xml_safe("\n".join(s.out)) if s.out else None
        ET.SubElement(el, "system-err")
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------- an evaluated batch


def _classname(partition: str, file: str | None) -> str:
    """``<configuration version>.<golden file stem>`` (dots in the stem made ``_``: a CI
    splits the class name at its last dot)."""
    if not file:
        return f"{partition}.unlisted"
    stem = file.rsplit("/", 1)[-1]
    stem = stem[: -len(".jsonl")] if stem.endswith(".jsonl") else stem
    return f"{partition}.{stem.replace('.', '_')}"


def case_testcase(results: BatchResults, case: CaseView) -> JUnitCase:
    """One golden case: passed; ``<failure>`` (a wrong answer, a refusal of an answerable
    question, an answered should-refuse question); ``<error>`` (every run ERROR: no answer);
    ``<skipped>`` (no graded run)."""
    tc = JUnitCase(_classname(results.partition_key, case.file), case.case_id, case.seconds)
    verdict = case.verdict
    if verdict == "passes":
        return tc
    where = f"{case.file}:{case.line}" if case.file else "not in the golden set now"
    lines = [f"case {case.case_id} ({where}), {results.partition_key} batch {results.batch.batch_id}",
             f"verdict: {verdict} — {AGGREGATION_RULE}"]
    compared = results.newly_failing_in(case.case_id)
    if compared:
        lines.append("newly failing against: " + ", ".join(
            f"{v.label} {v.comparison.baseline_partition}" for v in compared))
    for r in case.runs:
        lines += run_details(r, FIELD_CHARS)
    tc.body, tc.message = "\n".join(lines), case_summary(case)
    if verdict == "fails":
        tc.kind, tc.type = "failure", ",".join(sorted({r.outcome or "" for r in case.failing_runs}))
    elif verdict == "error":
        tc.kind, tc.type = "error", "ERROR"
    else:
        tc.kind = "skipped"
    return tc


def _comparison_testcase(results: BatchResults, view: ComparisonView) -> JUnitCase:
    c = view.comparison
    tc = JUnitCase(f"{results.partition_key}.gate", c.kind)
    against = c.baseline_partition or "nothing"
    if c.kind == "previous_batch" and c.baseline_batch:
        against += f" batch {c.baseline_batch}"
    if c.status == "skipped":
        tc.kind, tc.message = "skipped", f"not evaluated: {c.reason}"
        return tc
    acc = (f"accuracy {_pct(c.baseline_accuracy)} → {_pct(c.candidate_accuracy)}"
           + (f" ({100 * c.delta:+.1f} points{_delta_ci(view)})" if c.delta is not None else ""))
    lines = [f"{view.label} {against}: {c.status}", acc, c.reason,
             f"newly failing ({len(c.newly_failing)}): {', '.join(c.newly_failing) or 'none'}",
             f"newly passing ({len(c.newly_passing)}): {', '.join(c.newly_passing) or 'none'}"]
    lines += ["what changed:"] + [f"  {ch.field}: {ch.baseline} → {ch.candidate}" for ch in c.changes]
    tc.body = "\n".join(lines)
    if c.status == "failed":
        tc.kind, tc.type = "failure", "regression"
        tc.message = one_line(f"{view.label} {against}: {acc}; {len(c.newly_failing)} newly failing "
                              f"({', '.join(c.newly_failing[:10])}"
                              f"{' …' if len(c.newly_failing) > 10 else ''}); {c.reason}")
    elif c.status == "inconclusive":
        tc.kind, tc.type, tc.message = "error", "inconclusive", one_line(c.reason)
    return tc


def _delta_ci(view: ComparisonView) -> str:
    if view.diff is None:
        return ""
    try:
        ci = view.diff.metric("accuracy").ci
    except KeyError:
        return ""
    if ci is None or ci.low is None or ci.high is None:
        return ""
    return f", 95% interval {100 * ci.low:+.1f} to {100 * ci.high:+.1f}, {ci.tag}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def gate_testcases(results: BatchResults) -> list[JUnitCase]:
    """One test case per comparison the gate was asked to make (``baseline``,
    ``previous_version``, ``previous_batch``), then ``conclusive`` (an ``<error>`` when more
    than 10% of the attempts are ERROR: no comparison can pass such a batch)."""
    out = [_comparison_testcase(results, v) for v in results.comparisons]
    if results.report is None:
        out.append(JUnitCase(f"{results.partition_key}.gate", "baseline", kind="skipped",
                            message="not evaluated: no comparison was recorded for this batch"))
    why = (results.report.inconclusive if results.report is not None else None) or (
        f"{results.card.errors.count} of {results.card.attempts_total} attempts are ERROR"
        if results.card.inconclusive else None)
    conclusive = JUnitCase(f"{results.partition_key}.gate", "conclusive")
    if why:
        conclusive.kind, conclusive.type, conclusive.message = "error", "inconclusive", one_line(why)
    out.append(conclusive)
    return out


def evaluation_junit(results: BatchResults, *, hostname: str = "localhost") -> str:
    """The JUnit XML of an evaluated batch: one suite per golden file (one test case per case,
    ordered as the scorecard orders them) and one suite for the regression gate."""
    b, card = results.batch, results.card
    stamp = _timestamp(b.created_at)
    acc, strict = card.overall.accuracy, card.overall.strict_accuracy
    props = [("partition", b.partition_key), ("config_name", b.config_name),
             ("config_version", b.config_version), ("batch_id", b.batch_id),
             ("snapshot_id", b.snapshot_id), ("golden_hash", b.golden_hash), ("runs", str(b.runs)),
             ("gate", results.status), ("accuracy", _rate(acc)), ("strict_accuracy", _rate(strict)),
             ("aggregation", AGGREGATION_RULE)]
    summary = [f"gate: {results.status} — {results.gate_summary}",
               f"accuracy: {_rate(acc)}", f"strict accuracy: {_rate(strict)}",
               f"aggregation over runs: {AGGREGATION_RULE}"]
    flips = [c.case_id for c in results.cases if c.flips]
    if flips:
        summary.append(f"cases whose runs disagree ({len(flips)}): {', '.join(flips)}")
    if results.report_html is not None:
        summary.append(f"report: {results.report_html}")
    by_file: dict[str | None, list[CaseView]] = {}
    for c in results.cases:
        by_file.setdefault(c.file, []).append(c)
    suites = []
    for file, cases in sorted(by_file.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        suites.append(JUnitSuite(
            name=f"{b.partition_key} {file or 'cases not in the golden set now'}",
            package=b.partition_key, cases=[case_testcase(results, c) for c in cases],
            properties=props + [("golden_file", file or "")], out=summary, timestamp=stamp,
            hostname=hostname))
    gate_out = [f"gate: {results.status} — {results.gate_summary}"]
    gate_out += [f"{v.label}: waived — {v.comparison.reason}" for v in results.comparisons
                 if v.comparison.status == "waived"]
    suites.append(JUnitSuite(name=f"{b.partition_key} regression gate", package=b.partition_key,
                            cases=gate_testcases(results), properties=props, out=gate_out,
                            timestamp=stamp, hostname=hostname))
    return render(suites)


def _rate(rate) -> str:
    if rate.value is None:
        return f"n/a ({rate.num}/{rate.den})"
    ci = rate.ci
    out = f"{100 * rate.value:.1f}% ({rate.num}/{rate.den})"
    if ci is not None and ci.low is not None and ci.high is not None:
        out += f", 95% interval {100 * ci.low:.1f}–{100 * ci.high:.1f}% ({ci.method})"
    return out


# --------------------------------------------------------------------------- the hostile suite


def hostile_testcase(case: dict[str, Any]) -> JUnitCase:
    """One hostile case of a suite report (``SuiteReport.to_json()["cases"]``): passed when a
    guard layer blocked it or the adversarial double declined; ``<failure>`` when it got
    through, or failed only with a plain SQL error where a layer was expected; ``<error>``
    when the harness failed (nothing was proven); ``<skipped>`` for a case of your own that
    is not hostile on this project."""
    tc = JUnitCase(f"guardrails.{case.get('category') or 'uncategorised'}", str(case.get("case_id")),
                  float(case.get("elapsed_ms") or 0) / 1000)
    verdict, expect = case.get("verdict"), list(case.get("expect") or [])
    layer = case.get("blocked_by")
    detail = [f"case {case.get('case_id')} ({case.get('category')}, {case.get('kind')}): {verdict}",
              f"expected layer: {'/'.join(expect) or 'any'}; stopped by: {layer or 'none'}; "
              f"status: {case.get('status')}; reason: {case.get('reason')}",
              f"message: {clip(case.get('message'), FIELD_CHARS)}"]
    if case.get("question"):
        detail.append(f"question: {clip(case.get('question'), FIELD_CHARS)}")
    detail.append(f"sql: {clip(case.get('sql'), FIELD_CHARS)}")
    detail += [f"escape: {e}" for e in case.get("escapes") or []]
    detail += [f"row: {clip(r, 300)}" for r in case.get("sample") or []]
    expected = f" (expected {'/'.join(expect)})" if expect else ""
    if verdict == "got_through":
        if case.get("status") == "error":
            tc.kind, tc.type = "error", "harness_error"
            tc.message = (f"the harness failed ({case.get('reason')}): nothing was proven"
                          f"{expected}: {one_line(case.get('message'))}")
        else:
            tc.kind, tc.type = "failure", "got_through"
            escapes = "; ".join(case.get("escapes") or [])
            tc.message = (f"got through the guard: status {case.get('status')}, no layer stopped it"
                          f"{expected}" + (f"; {escapes}" if escapes else ""))
    elif verdict == "blocked_by_error" and case.get("failed"):
        tc.kind, tc.type = "failure", "not_proven_blocked"
        tc.message = (f"failed only with a plain SQL error ({case.get('reason')}){expected}: no "
                      f"guard layer was shown to stop it: {one_line(case.get('message'))}")
    elif verdict == "not_hostile":
        tc.kind, tc.message = "skipped", f"not hostile on this project: {one_line(case.get('warning'))}"
    else:
        return tc
    tc.message = one_line(tc.message)
    tc.body = "\n".join(detail)
    return tc


def guardrails_junit(report: dict[str, Any], *, skipped: Iterable[tuple[str, str]] = (),
                     hostname: str = "localhost", timestamp: str | dt.datetime | None = None) -> str:
    """The JUnit XML of a hostile-suite run (``SuiteReport.to_json()``, as ``guardrails.json``
    stores it): one test case per hostile case, ``snapshot checksum unchanged``, and one
    ``<skipped>`` test case per template not instantiated on this project (``skipped``:
    (template id, why))."""
    cases = [hostile_testcase(c) for c in report.get("cases") or []]
    check = JUnitCase("guardrails.snapshot", "checksum unchanged")
    if not report.get("checksum_unchanged", True):
        check.kind, check.type = "failure", "snapshot_changed"
        check.message = (f"the serving snapshot's SHA-256 changed during the suite: "
                         f"{report.get('checksum_before')} → {report.get('checksum_after')}")
    cases.append(check)
    cases += [JUnitCase("guardrails.not_instantiated", str(t), kind="skipped",
                       message=f"not instantiated on this project: {one_line(why)}") for t, why in skipped]
    totals = report.get("totals") or {}
    out = [f"{len(report.get('cases') or [])} hostile cases in {report.get('seconds')} s: "
           + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())),
           f"snapshot {report.get('snapshot')}: checksum "
           + ("unchanged" if report.get("checksum_unchanged", True) else "CHANGED")]
    unmet = report.get("expect_unmet") or []
    if unmet:
        out.append(f"blocked by another layer than expected ({len(unmet)}): {', '.join(unmet)}")
    props = [("snapshot", str(report.get("snapshot"))), ("passed", str(report.get("passed"))),
             ("checksum_before", str(report.get("checksum_before"))),
             ("checksum_after", str(report.get("checksum_after")))]
    suite = JUnitSuite(name="hostile suite", package="sqleval.guardrails", cases=cases,
                      properties=props, out=out, timestamp=_timestamp(timestamp), hostname=hostname)
    return render([suite])
