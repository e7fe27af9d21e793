"""Latency, tokens and cost per question on the scorecard, and the gate's limits on them.

Every expected number is worked out here from the attempt values the test builds (by hand, and
checked against numpy where numpy is the definition), never with the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from sqleval_pipeline.configs import ConfigError, Configuration, GateSettings, Pricing, config_version, load_config
from sqleval_pipeline.pipeline.recordio import flat_row, nested_fields
from sqleval_pipeline.pipeline.records import Attempt, Grade, Usage, load_records, save_records
from sqleval_pipeline.reporting.scorecard import gate_markdown, scorecard_markdown
from sqleval_pipeline.scoring import GateResult, Scorecard, build_scorecard, gate
from sqleval_pipeline.scoring.gate import Decision
from sqleval_pipeline.scoring.usage import read_attempt_usage

PRICES = Pricing(currency="EUR", input_per_million_tokens=3.0, output_per_million_tokens=15.0,
                 per_request=0.001)

# (case, run, kind, wall_s, input tokens, output tokens, retries)
ROWS = [
    ("q1", 0, "sql", 0.4, 1000, 100, 0),
    ("q1", 1, "sql", 1.0, 1200, 80, 0),
    ("q1", 2, "refusal", 2.0, 800, 20, 1),
    ("q2", 0, "sql", 3.0, None, None, 0),     # a vendor that reports no tokens
    ("q2", 1, "sql", 10.0, 2000, 400, 2),
    ("q2", 2, "sql", None, 1500, None, 0),    # no time; output tokens missing
    ("q3", 0, "error", 6.0, None, None, 3),   # gave up after 6 s: counts in latency
    ("q3", 1, "sql", None, None, None, 0),    # nothing recorded at all
]


def _usage(wall, tin, tout):
    if wall is None and tin is None and tout is None:
        return None
    return Usage(wall_s=wall, input_tokens=tin, output_tokens=tout, latency_ms=123.0)


def _attempts(config="c1", rows=ROWS):
    out = []
    for case, run, kind, wall, tin, tout, retries in rows:
        extra = ({"sql": f"SELECT {run}"} if kind == "sql" else
                 {"refusal_reason": "no"} if kind == "refusal" else {"error_code": "provider_timeout"})
        out.append(Attempt(config_version=config, case_id=case, run_index=run, kind=kind, **extra,
                           usage=_usage(wall, tin, tout), retries=retries))
    return out


def _grades(config="c1", rows=ROWS, outcome="CORRECT"):
    return [Grade(config_version=config, case_id=case, run_index=run,
                  outcome="ERROR" if kind == "error" else outcome, reason="x", grader_version="r1",
                  band="answerable", difficulty="top_k", split="dev", cluster="orders")
            for case, run, kind, *_ in rows]


# ---------------------------------------------------------------- the expected numbers, by hand
# times recorded: 0.4, 1.0, 2.0, 3.0, 10.0, 6.0 -> sorted 0.4, 1, 2, 3, 6, 10 (6 of 8 attempts)
# median = (2 + 3) / 2 = 2.5
# p95, linear between closest ranks: position 0.95 * (6 - 1) = 4.75 -> 6 + 0.75 * (10 - 6) = 9.0
# mean = 22.4 / 6
# input tokens: 1000, 1200, 800, 2000, 1500 -> median 1200, mean 6500 / 5 = 1300
# output tokens: 100, 80, 20, 400 -> median (80 + 100) / 2 = 90, mean 600 / 4 = 150
# cost (EUR) = in * 3e-6 + out * 15e-6 + 0.001, only where both counts are recorded:
#   q1/0: 0.003 + 0.0015 + 0.001 = 0.0055
#   q1/1: 0.0036 + 0.0012 + 0.001 = 0.0058
#   q1/2: 0.0024 + 0.0003 + 0.001 = 0.0037
#   q2/1: 0.006 + 0.006 + 0.001 = 0.013
#   total 0.028, mean 0.007 over 4 of 8 attempts
EXPECTED_TIMES = [0.4, 1.0, 2.0, 3.0, 10.0, 6.0]


def test_the_by_hand_numbers_agree_with_numpys_definitions():
    assert np.median(EXPECTED_TIMES) == pytest.approx(2.5)
    assert np.percentile(EXPECTED_TIMES, 95) == pytest.approx(9.0)


def test_latency_tokens_and_cost_per_question():
    card = build_scorecard(_grades(), attempts=_attempts(), pricing=PRICES, resamples=20)
    u = card.usage
    assert u.n_attempts == 8 and u.retries == 6
    assert (u.latency.n, u.latency.n_errors) == (6, 1)
    assert u.latency.median_s == pytest.approx(2.5)
    assert u.latency.p95_s == pytest.approx(9.0)
    assert u.latency.mean_s == pytest.approx(22.4 / 6)
    assert u.latency.max_s == 10.0
    assert (u.input_tokens.n, u.input_tokens.median, u.input_tokens.mean) == (5, 1200, 1300)
    assert (u.output_tokens.n, u.output_tokens.median, u.output_tokens.mean) == (4, 90, 150)
    assert u.cost.currency == "EUR" and u.cost.n == 4
    assert u.cost.total == pytest.approx(0.028)
    assert u.cost.mean_per_question == pytest.approx(0.007)
    assert u.pricing == PRICES


def test_only_the_scorecards_own_attempts_count():
    """Attempts of another configuration, or that the grades do not grade (a case removed
    from the golden set), are not this scorecard's questions."""
    stray = _attempts("other", [("q1", 0, "sql", 500.0, 10**6, 10**6, 9)]) + \
        _attempts("c1", [("q9", 0, "sql", 400.0, 10**6, 10**6, 9)])
    card = build_scorecard(_grades(), attempts=_attempts() + stray, pricing=PRICES, resamples=20)
    assert card.usage.n_attempts == 8 and card.usage.latency.p95_s == pytest.approx(9.0)
    assert card.usage.cost.total == pytest.approx(0.028)


def test_nothing_recorded_is_none_never_zero():
    rows = [("q1", r, "sql", None, None, None, 0) for r in range(3)]
    card = build_scorecard(_grades(rows=rows), attempts=_attempts(rows=rows), pricing=PRICES,
                           resamples=20)
    u = card.usage
    assert u.latency.n == 0 and (u.latency.median_s, u.latency.p95_s, u.latency.mean_s) == (None, None, None)
    assert (u.input_tokens.median, u.input_tokens.mean, u.output_tokens.mean) == (None, None, None)
    assert u.cost.n == 0 and u.cost.mean_per_question is None and u.cost.total is None
    md = scorecard_markdown(card)
    assert "| latency per question | not recorded (0 of 3 attempts have a time) |" in md
    assert "input not recorded (0 of 3); output not recorded (0 of 3)" in md
    assert "cost per question | not recorded" in md
    # without a price table there is no cost at all; without attempts, no usage at all
    assert build_scorecard(_grades(rows=rows), attempts=_attempts(rows=rows), resamples=20).usage.cost is None
    bare = build_scorecard(_grades(rows=rows), resamples=20)
    assert bare.usage is None
    assert "not measured: this scorecard was built without the attempts file" in scorecard_markdown(bare)


def test_a_price_per_request_alone_needs_no_tokens():
    rows = [("q1", r, "sql", None, None, None, 0) for r in range(3)]
    card = build_scorecard(_grades(rows=rows), attempts=_attempts(rows=rows),
                           pricing=Pricing(per_request=0.02), resamples=20)
    assert card.usage.cost.n == 3
    assert card.usage.cost.total == pytest.approx(0.06) and card.usage.cost.mean_per_question == pytest.approx(0.02)


def test_markdown_and_json_carry_the_numbers(tmp_path):
    path = save_records(tmp_path / "attempts.parquet", _attempts())
    card = build_scorecard(_grades(), attempts=path, pricing=PRICES, resamples=20)
    md = scorecard_markdown(card)
    assert ("| latency per question | median 2.500 s, p95 9.000 s, mean 3.733 s, max 10.0 s (over 6 "
            "of 8 attempts with a recorded time, 1 of them ERROR; retries and their waits "
            "included, 6 retries in all) |") in md
    assert "input median 1,200, mean 1,300 (5 of 8); output median 90, mean 150 (4 of 8)" in md
    assert "mean 0.007000 EUR, total 0.028000 EUR (over 4 of 8 attempts" in md
    card.save(tmp_path / "scorecard.json")
    data = json.loads((tmp_path / "scorecard.json").read_text())
    assert data["usage"]["latency"]["p95_s"] == pytest.approx(9.0)
    assert data["usage"]["latency"]["n"] == 6
    assert data["usage"]["cost"]["mean_per_question"] == pytest.approx(0.007)
    assert data["usage"]["pricing"]["currency"] == "EUR"
    assert Scorecard.load(tmp_path / "scorecard.json") == card


def test_a_scorecard_written_before_usage_loads(tmp_path):
    card = build_scorecard(_grades(), resamples=20)
    data = json.loads(card.to_json())
    del data["usage"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert Scorecard.load(tmp_path / "old.json").usage is None


# ---------------------------------------------------------------- old attempts files


def _write_old_parquet(path: Path, attempts: list[Attempt], drop_columns=()) -> Path:
    """An attempts file as earlier versions wrote it: the usage JSON has no ``wall_s`` (and,
    with ``drop_columns``, whole columns are missing)."""
    nested = nested_fields(Attempt)
    rows = []
    for a in attempts:
        row = flat_row(a, nested)
        if row["usage"] is not None:
            usage = json.loads(row["usage"])
            usage.pop("wall_s")
            row["usage"] = json.dumps(usage)
        for c in drop_columns:
            row.pop(c)
        rows.append(row)
    staged = path.with_suffix(".jsonl")
    staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_json_auto('{staged}')) TO '{path}' (FORMAT parquet)")
    con.close()
    assert '"wall_s"' not in staged.read_text()
    return path


def test_an_attempts_file_without_the_new_fields_loads(tmp_path):
    path = _write_old_parquet(tmp_path / "attempts.parquet", _attempts())
    loaded = load_records(path, Attempt)
    assert len(loaded) == 8 and all(a.usage is None or a.usage.wall_s is None for a in loaded)
    assert loaded[0].usage.input_tokens == 1000 and loaded[0].usage.latency_ms == 123.0
    card = build_scorecard(_grades(), attempts=path, pricing=PRICES, resamples=20)
    assert card.usage.latency.n == 0 and card.usage.latency.p95_s is None
    assert card.usage.input_tokens.mean == 1300  # tokens were recorded before: still read
    assert card.usage.cost.total == pytest.approx(0.028)


def test_an_early_attempts_file_without_usage_or_retries_columns_loads(tmp_path):
    path = _write_old_parquet(tmp_path / "attempts.parquet", _attempts(), drop_columns=("usage", "retries"))
    rows = read_attempt_usage(path)
    assert len(rows) == 8 and all(r.usage is None and r.retries == 0 for r in rows)
    card = build_scorecard(_grades(), attempts=path, resamples=20)
    assert card.usage.latency.n == 0 and card.usage.input_tokens.n == 0


# ---------------------------------------------------------------- the gate's limits


#: ROWS and three attempts with nothing recorded: 1 ERROR in 11 keeps the batch a measurement
#: (more than 10% ERROR is inconclusive); the latency and cost numbers are those of ROWS
GATE_ROWS = ROWS + [("q4", r, "sql", None, None, None, 0) for r in range(3)]


def _card(config, rows=GATE_ROWS, pricing=PRICES, **kw):
    return build_scorecard(_grades(config, rows), attempts=_attempts(config, rows), pricing=pricing,
                           resamples=20, **kw)


def test_limits_met_pass_and_are_recorded():
    r = gate(_card("base"), _card("cand"), [],
             thresholds=GateSettings(max_p95_latency_s=9.5, max_cost_per_question=0.0075))
    assert r.passed and [t.status for t in r.thresholds] == ["passed", "passed"]
    lat, cost = r.thresholds
    assert lat.value == pytest.approx(9.0) and (lat.n, lat.n_attempts) == (6, 11)
    assert cost.value == pytest.approx(0.007) and cost.n == 4
    assert "p95 latency 9.000 s is within gate.max_p95_latency_s = 9.5 s" in r.message
    saved = GateResult.model_validate_json(r.to_json())
    assert saved.thresholds == r.thresholds


@pytest.mark.parametrize("settings, failing", [
    (GateSettings(max_p95_latency_s=8.9), "p95 latency 9.000 s is above gate.max_p95_latency_s = 8.9 s"),
    (GateSettings(max_cost_per_question=0.0069),
     "mean cost per question 0.007 EUR is above gate.max_cost_per_question = 0.0069 EUR"),
])
def test_a_limit_exceeded_fails_and_no_decision_waives_it(settings, failing):
    ok = Decision(who="ana", why="accepted", date="2025-06-01", baseline="base", candidate="cand")
    r = gate(_card("base"), _card("cand"), [ok], thresholds=settings)
    assert not r.passed and not r.waived and r.failures == []
    assert [t.status for t in r.thresholds] == ["failed"]
    assert r.message.startswith("gate FAILED: " + failing)
    assert "A decision does not waive a limit" in r.message
    assert failing in gate_markdown(r)


def test_a_waived_regression_still_fails_on_a_limit():
    base = _card("base")
    cand = build_scorecard(_grades("cand", GATE_ROWS, outcome="WRONG"),
                           attempts=_attempts("cand", GATE_ROWS), pricing=PRICES, resamples=20)
    ok = Decision(who="ana", why="cheaper", date="2025-06-01", baseline="base", candidate="cand")
    assert gate(base, cand, [ok]).passed  # the regression alone is waived
    r = gate(base, cand, [ok], thresholds=GateSettings(max_p95_latency_s=1.0))
    assert not r.passed and r.waived
    assert "regression itself is accepted by decision of ana" in r.message


def test_a_limit_with_nothing_measured_fails_closed():
    untimed = [("q1", r, "sql", None, None, None, 0) for r in range(3)]
    cases = {
        "no time": (_card("cand", untimed), GateSettings(max_p95_latency_s=100),
                    "gate.max_p95_latency_s is 100 s but no latency was recorded (0 of 3 attempts have a time)"),
        "no attempts read": (build_scorecard(_grades("cand", GATE_ROWS), resamples=20),
                             GateSettings(max_p95_latency_s=100),
                             "no latency was recorded (the scorecard was built without its attempts)"),
        "no tokens": (_card("cand", untimed), GateSettings(max_cost_per_question=1.0),
                      "no cost was recorded (0 of 3 attempts have the token counts the price table needs)"),
        "no price table": (_card("cand", pricing=None), GateSettings(max_cost_per_question=1.0),
                           "no cost was recorded (the scorecard has no price table"),
    }
    for name, (cand, settings, fragment) in cases.items():
        base = _card("base", untimed if cand.n_attempts == 3 else GATE_ROWS)
        r = gate(base, cand, [], thresholds=settings)
        assert not r.passed, name
        assert [t.status for t in r.thresholds] == ["not_recorded"], name
        assert r.thresholds[0].value is None, name
        assert fragment in r.message and "the limit cannot be checked, so it fails" in r.message, name


def test_no_limit_set_changes_nothing():
    r = gate(_card("base"), _card("cand"), [], thresholds=GateSettings())
    assert r.passed and r.thresholds == [] and r.message == "gate passed: no regression"
    old = json.loads(r.to_json())
    del old["thresholds"]
    assert GateResult.model_validate(old).thresholds == []  # gate.json written before limits


# ---------------------------------------------------------------- the configuration


def _config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text("name: c\ngenerator: {kind: baseline}\ncontext: {curation: false}\n" + text)
    return p


@pytest.mark.parametrize("text, fragment", [
    ("pricing: {input_per_million_tokens: -3}", "field 'pricing.input_per_million_tokens'"),
    ("pricing: {output_per_million_tokens: cheap}", "field 'pricing.output_per_million_tokens'"),
    ("pricing: {per_reqest: 0.1}", "field 'pricing.per_reqest': Extra inputs"),
    ("pricing: {currency: dollars}", "field 'pricing.currency'"),
    ("gate: {max_p95_latency_s: 0}", "field 'gate.max_p95_latency_s'"),
    ("gate: {max_p95_latency_s: .inf}", "field 'gate.max_p95_latency_s'"),
    ("gate: {max_cost_per_question: 0.01}", "max_cost_per_question needs a price table"),
    ("gate: {max_latency: 3}", "field 'gate.max_latency'"),
])
def test_bad_pricing_and_limits_are_errors_naming_the_field(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(_config(tmp_path, text), tmp_path)
    assert fragment in str(info.value) and "c.yaml:4" in str(info.value)


def test_pricing_and_limits_are_not_part_of_the_version(tmp_path):
    plain = load_config(_config(tmp_path, ""), tmp_path)
    priced = load_config(_config(tmp_path, "pricing: {currency: usd, input_per_million_tokens: 3.0, "
                                           "output_per_million_tokens: 15.0, per_request: 0.0}\n"
                                           "gate: {max_p95_latency_s: 4, max_cost_per_question: 0.02}\n"),
                         tmp_path)
    assert priced.config.pricing == Pricing(currency="USD", input_per_million_tokens=3.0,
                                            output_per_million_tokens=15.0)
    assert priced.config.gate == GateSettings(max_p95_latency_s=4, max_cost_per_question=0.02)
    assert priced.version == plain.version
    # and a defining field still changes it (the check above is not vacuous)
    runs = Configuration(name="c", generator={"kind": "baseline"}, context={"curation": False}, runs=5)
    assert config_version(runs, tmp_path) != plain.version
