"""Judge calibration: Cohen's kappa on hand-computed examples, thresholds, tables, label files."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from sqleval_pipeline.judging.calibration import (
    CalibrationReport,
    HumanLabel,
    LabelError,
    calibrate,
    cohens_kappa,
    load_labels,
)
from sqleval_pipeline.pipeline.records import Diagnosis
from sqleval_pipeline.reporting.calibration import calibration_markdown, render_calibration

CATS = ["wrong_table", "wrong_filter", "wrong_metric", "wrong_grain", "ambiguous_question", "harness_bug"]


def diag(judge: str, case: str, category: str, *, run: int = 0, version: str = "v1") -> Diagnosis:
    return Diagnosis(config_version=version, case_id=case, run_index=run, category=category,
                     explanation="because", judge=judge, judge_version=f"{judge}-1")


def label(case: str, category: str, *, run: int = 0, config: str = "claude", who: str = "asha") -> HumanLabel:
    return HumanLabel(case_id=case, run_index=run, config_name=config, category=category, labeler=who)


# --------------------------------------------------------------------------- kappa


def test_kappa_hand_computed_two_categories():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15
    # p_o = 35/50 = 0.7; rater A says yes 25/50, rater B 30/50
    # p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    pairs = [("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15
    assert cohens_kappa(pairs) == pytest.approx(0.4)


def test_kappa_hand_computed_three_categories():
    # n = 8, 6 agree: p_o = 0.75. A: a4 b2 c2; B: a4 b3 c1
    # p_e = (4*4 + 2*3 + 2*1) / 64 = 24/64 = 0.375; kappa = 0.375 / 0.625 = 0.6
    pairs = [("a", "a")] * 3 + [("a", "b")] + [("b", "b")] * 2 + [("c", "a")] + [("c", "c")]
    assert cohens_kappa(pairs) == pytest.approx(0.6)


def test_kappa_perfect_and_chance_and_worse_than_chance():
    assert cohens_kappa([(c, c) for c in CATS] * 3) == 1.0
    # independent raters: every combination of two categories once -> p_o = p_e = 0.5
    assert cohens_kappa([("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")]) == pytest.approx(0.0)
    # systematic swap: p_o = 0, p_e = 0.5 -> kappa = -1
    assert cohens_kappa([("a", "b"), ("b", "a")]) == pytest.approx(-1.0)


def test_kappa_degenerate_cases_do_not_divide_by_zero():
    assert cohens_kappa([]) is None
    assert cohens_kappa([("wrong_filter", "wrong_filter")] * 7) is None  # p_e = 1
    # one rater uses one category only: defined; here p_o = p_e = 0.5 -> 0
    assert cohens_kappa([("a", "a"), ("a", "a"), ("a", "b"), ("a", "b")]) == pytest.approx(0.0)


# --------------------------------------------------------------------------- calibrate


def _judge_on(n: int, judge: str = "rules", wrong_every: int = 0) -> tuple[list[Diagnosis], list[HumanLabel]]:
    diagnoses, labels = [], []
    for i in range(n):
        human = CATS[i % len(CATS)]
        got = CATS[(i + 1) % len(CATS)] if wrong_every and i % wrong_every == 0 else human
        diagnoses.append(diag(judge, f"q{i:02d}", got))
        labels.append(label(f"q{i:02d}", human))
    return diagnoses, labels


@pytest.mark.parametrize("n, status", [(0, "uncalibrated (n < 20)"), (19, "uncalibrated (n < 20)"),
                                       (20, "calibrated"), (25, "calibrated")])
def test_status_threshold(n, status):
    diagnoses, labels = _judge_on(n)
    j = calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude"}).judges[0]
    assert j.n == n and j.status == status and j.calibrated == (status == "calibrated")
    assert j.agreement_rate == (1.0 if n else None)
    assert j.kappa == (1.0 if n else None)


def test_agreement_kappa_and_confusion():
    diagnoses, labels = _judge_on(24, wrong_every=4)  # 6 of 24 wrong
    j = calibrate({"rules": diagnoses}, labels, config_name_of=lambda v: "claude").judges[0]
    assert (j.n, j.agreements) == (24, 18) and j.agreement_rate == pytest.approx(0.75)
    pairs = [(lab.category, d.category) for lab, d in zip(labels, diagnoses, strict=True)]
    assert j.kappa == pytest.approx(cohens_kappa(pairs))
    assert sum(sum(row.values()) for row in j.confusion.values()) == 24
    assert sum(j.confusion[c][c] for c in CATS) == 18
    # i = 0, 12 are wrong_table (human) diagnosed wrong_filter
    assert j.confusion["wrong_table"]["wrong_filter"] == 2
    assert j.judge_versions == ["rules-1"] and j.labelled_not_diagnosed == 0


def test_single_category_everywhere_is_handled():
    diagnoses = [diag("rules", f"q{i}", "wrong_filter") for i in range(21)]
    labels = [label(f"q{i}", "wrong_filter") for i in range(21)]
    j = calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude"}).judges[0]
    assert j.agreement_rate == 1.0 and j.kappa is None and "undefined" in j.kappa_note
    # one category throughout: nothing shows that the judge tells categories apart
    assert j.status == "uncalibrated (kappa undefined < 0.60)" and not j.calibrated
    assert "n/a" in calibration_markdown(calibrate({"rules": diagnoses}, labels,
                                                   config_name_of={"v1": "claude"}))


def test_labels_match_by_config_name_across_versions():
    # version v1 and v2 of the "claude" config; labels name the config, not the version
    diagnoses = [diag("rules", "q1", "wrong_table", version="v1"),
                 diag("rules", "q2", "wrong_grain", version="v2"),
                 # the same name/case/run diagnosed under two versions: ambiguous
                 diag("rules", "q3", "wrong_grain", version="v1"),
                 diag("rules", "q3", "wrong_grain", version="v2"),
                 diag("rules", "q9", "wrong_metric", version="v3")]
    labels = [label("q1", "wrong_table"), label("q2", "wrong_metric"), label("q3", "wrong_grain"),
              label("q4", "harness_bug"), label("q9", "wrong_metric", config="openai")]
    names = {"v1": "claude", "v2": "claude", "v3": "openai"}
    j = calibrate({"rules": diagnoses}, labels, config_name_of=names).judges[0]
    assert (j.n, j.agreements, j.labelled_not_diagnosed) == (3, 2, 1)
    assert [(a.config_name, a.case_id) for a in j.ambiguous] == [("claude", "q3")]
    with pytest.raises(ValueError, match="no configuration name for config version 'v3'"):
        calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude", "v2": "claude"})


def test_human_consensus_and_conflicts():
    diagnoses = [diag("rules", "q1", "wrong_table"), diag("rules", "q2", "wrong_filter")]
    labels = [label("q1", "wrong_table", who="asha"), label("q1", "wrong_table", who="bo"),
              label("q2", "wrong_filter", who="asha"), label("q2", "wrong_metric", who="bo")]
    report = calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude"})
    assert report.n_labels == 4 and report.n_labelled_attempts == 1
    assert report.labelers == ["asha", "bo"]
    assert [(c.attempt.case_id, c.labels) for c in report.human_conflicts] == [
        ("q2", {"asha": "wrong_filter", "bo": "wrong_metric"})]
    assert report.judges[0].n == 1
    with pytest.raises(ValueError, match="asha labelled attempt claude/q1/run 0 both"):
        calibrate({}, [label("q1", "wrong_table"), label("q1", "wrong_grain")], config_name_of={})


def test_inconsistent_diagnoses_are_refused():
    with pytest.raises(ValueError, match="two diagnoses"):
        calibrate({"rules": [diag("rules", "q1", "wrong_table"), diag("rules", "q1", "wrong_grain")]},
                  [], config_name_of={"v1": "c"})
    with pytest.raises(ValueError, match="from judge 'llm:x'"):
        calibrate({"rules": [diag("llm:x", "q1", "wrong_table")]}, [], config_name_of={"v1": "c"})


def test_disagreement_table_between_judges():
    rules = [diag("rules", f"q{i}", c) for i, c in enumerate(
        ["wrong_filter", "wrong_filter", "wrong_filter", "wrong_table", "wrong_grain", "harness_bug"])]
    llm = [diag("llm:m", f"q{i}", c) for i, c in enumerate(
        ["ambiguous_question", "ambiguous_question", "wrong_filter", "wrong_metric", "wrong_grain"])]
    llm.append(diag("llm:m", "q99", "wrong_table"))  # only the LLM judge diagnosed it
    report = calibrate({"rules": rules, "llm:m": llm}, [], config_name_of={"v1": "claude"})
    assert len(report.disagreements) == 1
    p = report.disagreements[0]
    assert (p.judge_a, p.judge_b, p.n_both, p.n_agree) == ("llm:m", "rules", 5, 2)
    assert p.agreement_rate == pytest.approx(0.4)
    rows = [(r.judge_a_category, r.judge_b_category, r.count) for r in p.rows]
    assert rows == [("ambiguous_question", "wrong_filter", 2), ("wrong_metric", "wrong_table", 1)]
    assert [e.key for e in p.rows[0].examples] == [("v1", "q0", 0), ("v1", "q1", 0)]
    # both judges are uncalibrated without labels
    assert all(j.status == "uncalibrated (n < 20)" and j.n == 0 for j in report.judges)
    md = calibration_markdown(report)
    assert "### Disagreements: llm:m vs rules" in md
    assert "| ambiguous_question | wrong_filter | 2 | v1/q0/run 0, v1/q1/run 0 |" in md


def test_report_serialises_and_renders():
    diagnoses, labels = _judge_on(20, wrong_every=5)
    llm = [diag("llm:m", d.case_id, "wrong_grain") for d in diagnoses[:3]]
    labels.append(label("q00", "wrong_grain", who="bo"))  # a conflict
    report = calibrate({"rules": diagnoses, "llm:m": llm}, labels, config_name_of={"v1": "claude"})
    again = CalibrationReport.model_validate_json(report.model_dump_json())
    assert again == report
    json.loads(report.model_dump_json())

    md = calibration_markdown(report)
    assert "| rules | rules-1 | 19 |" in md and "| calibrated" not in md  # 19 after the conflict
    assert "uncalibrated (n < 20)" in md and "### Human conflicts (left out)" in md
    assert "### rules: human (rows) × judge (columns)" in md

    console = Console(record=True, width=160, file=io.StringIO())
    render_calibration(report, console)
    out = console.export_text()
    assert "Judge calibration" in out and "uncalibrated (n < 20)" in out
    assert "Disagreements: llm:m vs rules" in out and "conflicting human labels" in out


# --------------------------------------------------------------------------- label files

GOOD = {"case_id": "q07", "run_index": 1, "config_name": "claude", "category": "wrong_filter",
        "labeler": "asha"}


def _write(path, *lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
                    encoding="utf-8")


def test_load_labels_reads_every_file(tmp_path):
    _write(tmp_path / "a.jsonl", GOOD, "", {**GOOD, "case_id": "q08", "note": "status code"})
    _write(tmp_path / "b.jsonl", {**GOOD, "labeler": "bo"})
    (tmp_path / "README.md").write_text("not a label file")
    labels = load_labels(tmp_path)
    assert [(lab.case_id, lab.labeler, lab.note) for lab in labels] == [
        ("q07", "asha", None), ("q08", "asha", "status code"), ("q07", "bo", None)]
    assert labels[0].key == ("claude", "q07", 1)
    assert load_labels(str(tmp_path)) == labels  # a str path works too


def test_load_labels_errors_name_file_line_field(tmp_path):
    bad = tmp_path / "batch1.jsonl"
    missing = dict(GOOD)
    del missing["labeler"]
    _write(bad,
           GOOD,                                              # 1 fine
           "{not json",                                       # 2
           missing,                                           # 3 labeler missing
           {**GOOD, "case_id": "q09", "category": "typo"},    # 4 bad category
           {**GOOD, "case_id": "q10", "run_index": -1},       # 5 bad run index
           {**GOOD, "case_id": "q11", "confidence": 0.9},     # 6 unknown field
           [1, 2],                                            # 7 not an object
           GOOD)                                              # 8 duplicate of line 1
    with pytest.raises(LabelError) as info:
        load_labels(tmp_path)
    problems = info.value.problems
    assert len(problems) == 7
    assert problems[0].startswith(f"{bad}:2: not valid JSON")
    assert problems[1].startswith(f"{bad}:3:labeler: Field required")
    assert problems[2].startswith(f"{bad}:4:category: Input should be 'wrong_table'")
    assert problems[3].startswith(f"{bad}:5:run_index: ")
    assert problems[4].startswith(f"{bad}:6:confidence: Extra inputs are not permitted")
    assert problems[5].startswith(f"{bad}:7: expected a JSON object")
    assert problems[6].startswith(f"{bad}:8:labeler: asha already labelled attempt claude/q07/run 1 "
                                  f"at {bad}:1")
    assert str(bad) + ":3:labeler" in str(info.value)


def test_load_labels_missing_directory(tmp_path):
    with pytest.raises(LabelError, match="does not exist"):
        load_labels(tmp_path / "nope")
    assert load_labels(tmp_path) == []


def test_kappa_threshold_and_interval_against_a_hand_computed_example():
    """20 attempts, two categories, 10 each for the human; the judge gets 14 right:
    human a×10, b×10; judge says a for 7 of the a's and for 3 of the b's.
    p_o = (7 + 7) / 20 = 0.7; judge a×10, b×10, so p_e = (10·10 + 10·10) / 400 = 0.5;
    kappa = (0.7 − 0.5) / 0.5 = 0.4; SE = sqrt(0.7·0.3 / (20·0.25)) = 0.2049;
    interval 0.4 ± 1.96·0.2049 = [−0.0017, 0.8017]. Below 0.6: uncalibrated."""
    a, b = "wrong_table", "wrong_filter"
    human = [a] * 10 + [b] * 10
    judge = [a] * 7 + [b] * 3 + [a] * 3 + [b] * 7
    diagnoses = [diag("rules", f"q{i:02d}", j) for i, j in enumerate(judge)]
    labels = [label(f"q{i:02d}", h) for i, h in enumerate(human)]
    j = calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude"}).judges[0]
    assert (j.n, j.agreements) == (20, 14)
    assert j.kappa == pytest.approx(0.4)
    low, high = j.kappa_ci
    assert low == pytest.approx(0.4 - 1.96 * (0.7 * 0.3 / 5) ** 0.5)
    assert high == pytest.approx(0.4 + 1.96 * (0.7 * 0.3 / 5) ** 0.5)
    assert j.status == "uncalibrated (kappa 0.40 < 0.60)" and not j.calibrated
    lenient = calibrate({"rules": diagnoses}, labels, config_name_of={"v1": "claude"},
                        min_kappa=0.35).judges[0]
    assert lenient.calibrated and lenient.status == "calibrated"
