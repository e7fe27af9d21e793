"""The pull-request summary of ``sqleval run --summary``: verdict first, bounded size, and
untrusted text that cannot break the Markdown.

The Markdown is parsed back with markdown-it (CommonMark with GitHub's tables), so the checks
are on the structure a renderer sees: how many table rows and cells, which HTML reaches the
page, what a fenced block holds.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from markdown_it import MarkdownIt

from sqleval_pipeline.reporting.ci_batch import CaseView, RunView, golden_locations, load_batch_results
from sqleval_pipeline.reporting.pr_summary import MAX_SIZE, pr_summary
from tests.reporting.ci_batches import Spec, gate_against, write_batch, write_golden

BASE, CAND = "base@11111111", "cand@22222222"
RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                         "\ufeff\ud800-\udfff]")
OUR_HTML = re.compile(r"^(<details><summary>[^<>]*</summary>|</details>)$")


def tokens(text: str):
    return MarkdownIt("commonmark").enable("table").parse(text)


def rendered(inline) -> str:
    """The text a reader sees of an inline token (escapes and entities undone)."""
    return "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline", "text_special"))


def table_rows(text: str, header: str) -> list[list[str]]:
    """The body rows (cell texts) of the table under the ``header`` heading."""
    toks = tokens(text)
    start = next(i for i, t in enumerate(toks) if t.type == "inline" and t.content.startswith(header))
    rows, row, inside = [], None, False
    for t in toks[start:]:
        if t.type == "tbody_open":
            inside = True
        elif t.type == "tbody_close":
            break
        elif inside and t.type == "tr_open":
            row = []
        elif inside and t.type == "inline" and row is not None:
            row.append(rendered(t))
        elif inside and t.type == "tr_close":
            rows.append(row)
            row = None
    return rows


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


@pytest.fixture
def gated(tmp_path):
    store = tmp_path / "store"
    ids = [f"q{i}" for i in range(6)]
    base = write_batch(store, BASE, "b1", [Spec(i, ["CORRECT"] * 3, cluster=f"c{n % 2}")
                                           for n, i in enumerate(ids)])
    cand = write_batch(store, CAND, "b2", [Spec("q0", ["WRONG"] * 3, mismatch="expected 3 rows, got 4"),
                                           Spec("q1", ["WRONG", "CORRECT", "WRONG"])]
                       + [Spec(i, ["CORRECT"] * 3, cluster=f"c{n % 2}") for n, i in enumerate(ids[2:])])
    gate_against(cand, base)
    golden = tmp_path / "evals" / "golden"
    write_golden(golden / "g.jsonl", ids)
    return tmp_path, cand, load_batch_results(cand.folder, golden_locations(golden, tmp_path)), base


def test_the_verdict_comes_first_then_the_newly_failing_cases_then_accuracy(gated):
    _root, cand, results, base = gated
    text = pr_summary(results)
    first = text.splitlines()[0]
    assert first.startswith("## sqleval: gate FAILED") and CAND in first
    order = [text.index(h) for h in ("Regression gate FAILED", "### Newly failing cases (2)",
                                     "### Accuracy", "### Comparisons")]
    assert order == sorted(order)
    rows = table_rows(text, "Newly failing cases")
    assert [r[0] for r in rows] == ["q0", "q1"]
    assert rows[0][1] == "evals/golden/g.jsonl:1" and "expected 3 rows, got 4" in rows[0][4]
    assert rows[1][2] == "run 0 WRONG, run 1 CORRECT, run 2 WRONG"
    # accuracy with its interval for this batch and for the baseline, read from their scorecards
    acc = {r[0]: r[2] for r in table_rows(text, "Accuracy")}
    for key, folder in ((CAND, cand.folder), (BASE, base.folder)):
        a = json.loads((folder / "scorecard.json").read_text())["overall"]["accuracy"]
        assert acc[key].startswith(f"{100 * a['value']:.1f}% ({a['num']}/{a['den']}) "
                                   f"[{100 * a['ci']['low']:.1f}–{100 * a['ci']['high']:.1f}%")


def test_nothing_to_compare_with_says_so(tmp_path):
    cand = write_batch(tmp_path / "store", CAND, "b2", [Spec("q0", ["WRONG"] * 3)])
    gate_against(cand, None)
    text = pr_summary(load_batch_results(cand.folder))
    assert text.startswith("## sqleval: gate not gated")
    assert "none (nothing to compare with)" in text
    assert [r[2] for r in table_rows(text, "Comparisons")] == ["not evaluated: no baseline configured",
                                                              "not evaluated: no earlier version",
                                                              "not evaluated: first batch of this version"]


HOSTILE_SQL = ("SELECT '```' AS \"</details>\", '<script>alert(1)</script>' -- @octocat | x |\n"
               "````\n~~~\n" + "\x00\x1b[2J\u202e" + chr(0xD800) + "\r\n$x$ *bold* [link](http://e.x)")
HOSTILE_TEXT = "a | b\n# not a heading\n<img src=x onerror=alert(1)> @octocat *em* `tick` $m$ \x07\u2028"


def test_untrusted_text_cannot_break_the_markdown(tmp_path):
    store = tmp_path / "store"
    base = write_batch(store, BASE, "b1", [Spec("q0", ["CORRECT"] * 3), Spec("q1", ["CORRECT"] * 3)])
    cand = write_batch(store, CAND, "b2", [
        Spec("q0", ["WRONG"] * 3, sql=HOSTILE_SQL, mismatch=HOSTILE_TEXT,
             diagnosis=("rules", "wrong_filter", HOSTILE_TEXT)),
        Spec("q1", ["DEFERRED_WRONGLY"] * 3, refusal=HOSTILE_TEXT)])
    gate_against(cand, base)
    text = pr_summary(load_batch_results(cand.folder))
    assert not RAW_CONTROL.search(text)
    toks = tokens(text)
    # nobody is mentioned: outside code, a zero-width space follows the @ (in code GitHub
    # mentions no one)
    seen = "".join(rendered(t) for t in toks if t.type == "inline")
    assert "@octocat" not in seen and "@\u200boctocat" in seen
    # the only HTML is the summary's own collapsible sections
    html = [t.content.strip() for t in toks if t.type == "html_block"]
    html += [c.content for t in toks if t.type == "inline" for c in t.children or [] if c.type == "html_inline"]
    assert html and all(OUR_HTML.match(h) for h in html), html
    # the tables keep their shape: 5 cells a row, the untrusted text inside one cell
    rows = table_rows(text, "Newly failing cases")
    assert len(rows) == 2 and all(len(r) == 5 for r in rows)
    assert not any(t.type == "heading_open" and t.tag == "h1" for t in toks)
    # the SQL is one fenced block holding the text as written (controls as their escapes)
    fences = [t for t in toks if t.type == "fence"]
    assert len(fences) == 1 and fences[0].info == "sql"
    expected = (HOSTILE_SQL.replace("\r\n", "\n").replace("\x00", "\\u0000").replace("\x1b", "\\u001b")
                .replace("\u202e", "\\u202e").replace(chr(0xD800), "\\ud800"))
    assert fences[0].content == expected + "\n"


def _huge(results, n: int):
    """``results`` with ``n`` newly failing cases, each with long text that needs escaping."""
    long = ("@x `|` <b> " * 200)[:3000]
    cases = [CaseView(f"case-{i:05d}", "answerable",
                      [RunView(r, "WRONG", "result_mismatch", mismatch=long, sql=f"SELECT {i} -- " + long,
                               diagnoses=[("rules", "wrong_filter", long)]) for r in range(5)],
                      file="evals/golden/big.jsonl", line=i + 1) for i in range(n)]
    return dataclasses.replace(results, cases=cases, newly_failing=[c.case_id for c in cases])


@pytest.mark.parametrize("limit", [MAX_SIZE, 20_000, 3_000])
def test_a_huge_batch_fits_the_limit_and_says_how_many_were_left_out(gated, limit):
    _root, _cand, results, _base = gated
    n = 5000
    text = pr_summary(_huge(results, n), limit=limit)
    assert utf8_size(text) <= limit and len(text) <= limit
    assert text.startswith("## sqleval: gate FAILED")
    shown = table_rows(text, "Newly failing cases")
    more = re.search(r"… and (\d+) more newly failing cases \(full report", text)
    assert more, text[-500:]
    assert len(shown) + int(more.group(1)) == n
    assert [r[0] for r in shown] == [f"case-{i:05d}" for i in range(len(shown))]
    if limit == MAX_SIZE:
        assert len(shown) > 10 and "### Accuracy" in text    # the rest of the summary is still there
    assert not RAW_CONTROL.search(text)


def test_a_case_is_found_by_its_id_the_first_of_two_and_after_the_list_grows(gated):
    _root, _cand, results, _base = gated
    r = _huge(results, 3)
    assert r.case("case-00001") is r.cases[1] and r.case("no-such-case") is None
    r.cases.append(dataclasses.replace(r.cases[2], case_id="case-00000"))
    late = dataclasses.replace(r.cases[2], case_id="late")
    r.cases.append(late)
    assert r.case("case-00000") is r.cases[0] and r.case("late") is late


def test_the_default_pointer_names_the_batch_report(gated):
    _root, cand, results, _base = gated
    (cand.folder / "report.html").write_text("<html></html>")
    results = dataclasses.replace(results, report_html=cand.folder / "report.html")
    assert f"full report: `{cand.folder / 'report.html'}`" in pr_summary(results)
