"""``sqleval golden propose``: SQL-first proposals on the demo and on the insurance example —
run through the guard, spread over difficulties and tables, new (to the golden set, to each
other, to rejected proposals), deterministic for a seed, and in no accuracy before review."""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
from itertools import combinations
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline import project as proj
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.generation.context import load_catalog
from sqleval_pipeline.semantic import project_glossary
from sqleval_pipeline.golden import describe, dedup, propose, vocabulary
from sqleval_pipeline.golden.dedup import normalise_sql, similar_questions
from sqleval_pipeline.golden.freeze import freeze_cases
from sqleval_pipeline.golden.verify import verify_cases
from sqleval_pipeline.golden.loader import load_golden
from sqleval_pipeline.golden.vocabulary import Measure
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.guard.policy import project_policy
from tests.conftest import INSURANCE as FIXTURE
from tests.golden.conftest import sqleval


class Env:
    """A project's pinned snapshot, vocabulary and guard, for proposing in-process."""

    def __init__(self, root: Path):
        self.project = proj.load_project(root)
        self.snapshot_id, self.manifest, self.serving = snap.pinned_snapshot(
            self.project.manifest_dir, self.project.home.snapshot_dir)
        self.catalog = load_catalog(self.serving, self.manifest.as_of,
                                    models_dir=self.project.models_dir)
        self.glossary = project_glossary(self.project)
        self.guard = GuardedExecutor(self.serving, as_of=self.manifest.as_of,
                                     policy=project_policy(self.project, self.manifest))

    def cases(self):
        return load_golden(self.project.golden_dir).cases

    def vocab(self):
        return vocabulary.vocabulary(self.catalog, self.glossary)

    def propose(self, n, seed, *, vocab=None, existing=None, rejected=(), max_rows=propose.MAX_ROWS,
                **kw):
        return propose.propose(
            n, vocab=vocab or self.vocab(), execute=lambda s: self.guard.execute(s, limit=max_rows + 1),
            as_of=self.manifest.as_of, seed=seed,
            existing=self.cases() if existing is None else existing, rejected=rejected,
            difficulties=self.project.difficulties, max_rows=max_rows,
            snapshot_id=self.snapshot_id, **kw)


@pytest.fixture
def demo(demo_project):
    env = Env(demo_project)
    yield env
    env.guard.close()


def _signature(report):
    return [(p.case.id, p.case.question, p.case.reference_sql, p.case.difficulty)
            for p in report.proposals]


def assert_new_and_checked(env: Env, report, existing, n: int, max_rows: int = propose.MAX_ROWS):
    cases = [p.case for p in report.proposals]
    assert len(cases) == n, report.dropped
    for case, p in zip(cases, report.proposals, strict=True):
        assert case.status == "generated" and case.expected is None and case.snapshot_id is None
        assert case.band == "answerable" and case.difficulty in env.project.difficulties
        assert re.fullmatch(r"propose:\S+:seed=-?\d+", case.provenance.source)
        assert case.provenance.reviewer is None and case.provenance.date == dt.date.today()
        res = env.guard.execute(case.reference_sql)  # through every layer of the guard
        assert res.ok, (case.reference_sql, res.describe())
        assert 0 < len(res.result.rows) <= max_rows
        assert res.result.rows == p.preview.rows  # what the proposer saw is what runs
    # no duplicates: among the proposals, nor of an existing case (SQL or question)
    norms = [normalise_sql(c.reference_sql) for c in cases]
    assert len(set(norms)) == len(norms)
    taken = {normalise_sql(s) for c in existing for s in [c.reference_sql, *c.alternative_sqls]}
    assert not taken & set(norms)
    values = env.vocab().values()
    for a, b in combinations(cases, 2):
        assert not similar_questions(a.question, b.question, values), (a.question, b.question)
    for c in cases:
        assert not any(similar_questions(c.question, e.question, values) for e in existing), c.question
    assert not {c.id for c in cases} & {c.id for c in existing}
    assert len({c.id for c in cases}) == len(cases)


def test_demo_proposals_are_new_run_through_the_guard_and_spread(demo):
    existing = demo.cases()
    report = demo.propose(15, seed=5)
    assert_new_and_checked(demo, report, existing, 15)
    cases = [p.case for p in report.proposals]
    assert len({c.difficulty for c in cases}) >= 4
    assert len({p.draft.table for p in report.proposals}) >= 4
    assert all(c.provenance.source == "propose:template:seed=5" for c in cases)
    top = [c for c in cases if c.difficulty == "top_k"]
    assert top and all(c.order_matters and "ORDER BY" in c.reference_sql for c in top)
    # the glossary's definitions are used: some measure keeps the metric's filter
    filters = {t.filter for t in demo.glossary.terms if t.kind == "metric" and t.filter}
    assert any(f in c.reference_sql for c in cases for f in filters)


def test_a_seed_decides_the_proposals(demo):
    first = _signature(demo.propose(10, seed=21))
    assert _signature(demo.propose(10, seed=21)) == first
    assert _signature(demo.propose(10, seed=22)) != first


def test_errors_empty_and_huge_results_are_dropped(demo):
    vocab = demo.vocab()
    table = next(t for t in vocab.tables if len(t.dimensions) >= 2 and len(t.measures) >= 3)
    table.measures = [Measure("broken total", "sum(no_such_column)", "broken", "sum"),
                      Measure("nothing", "sum(1)", "nothing", "sum", filter="1 = 0"),
                      *table.measures[:2]]
    vocab.tables = [table]
    report = demo.propose(8, seed=3, vocab=vocab, existing=[], max_rows=3)
    assert report.dropped["refused or failed in the guard"] > 0
    assert report.dropped["empty result"] > 0
    assert report.dropped["more than 3 rows"] > 0
    assert report.proposals
    for p in report.proposals:
        assert "no_such_column" not in p.case.reference_sql and "1 = 0" not in p.case.reference_sql
        assert len(p.preview.rows) <= 3


def test_rejected_or_taken_sql_and_questions_are_not_proposed_again(demo):
    first = demo.propose(6, seed=8).proposals
    rejected_sql, taken, rejected_question = first[0].case, first[1].case, first[2].case
    # each is caught by one signal only: the same SQL (written otherwise, under another
    # question, with no frozen answer), or a question worded alike over other SQL
    other = {"question": "A question worded nothing alike at all?"}
    rejected = [{"rejected": {"reason": "wrong grain"},
                 "case": {**json.loads(rejected_sql.to_json_line()), **other}},
                {"rejected": {"reason": "asked before"},
                 "case": {"id": "old-001", "question": rejected_question.question + " ",
                          "reference_sql": "SELECT 42 AS answer"}}]
    rewritten = taken.reference_sql.replace("SELECT", "select").replace(" FROM ", "\n  from ")
    taken_elsewhere = taken.model_copy(update={"id": "hand-001", "reference_sql": rewritten + " ;",
                                               "question": "Another wording entirely, ok?"})
    again = demo.propose(6, seed=8, existing=[*demo.cases(), taken_elsewhere],
                         rejected=rejected).proposals
    sqls = {normalise_sql(p.case.reference_sql) for p in again}
    for gone in (rejected_sql, taken, rejected_question):
        assert normalise_sql(gone.reference_sql) not in sqls
    assert rejected_question.question not in {p.case.question for p in again}
    # ids of rejected proposals are never given out again
    assert rejected_sql.id not in {p.case.id for p in again}


def test_verification_leaves_unreviewed_proposals_alone(demo):
    cases = [p.case for p in demo.propose(4, seed=2).proposals]
    assert verify_cases(cases, demo.serving, demo.snapshot_id, demo.manifest.as_of) == []
    frozen = freeze_cases([c.model_copy(update={"status": "verified"}) for c in cases],
                          demo.serving, demo.snapshot_id, demo.manifest.as_of)
    assert verify_cases(frozen, demo.serving, demo.snapshot_id, demo.manifest.as_of) == []
    unfrozen = frozen[0].model_copy(update={"expected": None})
    assert [d.case_id for d in verify_cases([unfrozen], demo.serving, demo.snapshot_id,
                                            demo.manifest.as_of)] == [unfrozen.id]


def test_generated_cases_never_enter_accuracy_before_review(demo):
    from sqleval_pipeline.grading import grade_attempt
    from sqleval_pipeline.pipeline.records import Attempt
    from sqleval_pipeline.scoring.scorecard import build_scorecard

    verified = [c for c in demo.cases() if c.status == "verified" and c.answerable][:6]
    generated = [p.case for p in demo.propose(5, seed=13).proposals]

    def grades(cases):
        out = []
        for c in cases:
            for run in range(3):
                if c.status == "generated" and run == 2:
                    att = Attempt(config_version="cfg", case_id=c.id, run_index=run,
                                  kind="refusal", refusal_reason="not sure")
                    out.append(grade_attempt(c, att, None))
                    continue
                sql = c.reference_sql if run == 0 or c.status == "verified" else \
                    "SELECT no_such_column FROM " + sorted(snap_tables(c))[0]
                att = Attempt(config_version="cfg", case_id=c.id, run_index=run, kind="sql", sql=sql)
                ex = demo.guard.execute(sql).to_execution("cfg", c.id, run)
                out.append(grade_attempt(c, att, ex))
        return out

    card = build_scorecard(grades([*verified, *generated]), config_version="cfg")
    assert card.overall.accuracy.den == 3 * len(verified)
    assert card.overall.accuracy.num == 3 * len(verified)
    assert sum(s.accuracy.den for s in card.by_split.values()) == 3 * len(verified)
    assert card.refusal.over_refusal_rate.den == 3 * len(verified)
    assert card.execution_only.n_cases == len(generated)
    assert card.execution_only.n_attempts == 3 * len(generated)
    assert card.execution_only.executed_ok.num == len(generated)  # only run 0's SQL ran
    assert all(o is None for c in card.cases if c.case_status == "generated" for o in c.outcomes)

    # once a reviewer accepts one (frozen, verified), its attempts count like any other
    accepted = freeze_cases([generated[0].model_copy(update={"status": "verified"})],
                            demo.serving, demo.snapshot_id, demo.manifest.as_of)
    card = build_scorecard(grades([*verified, *accepted, *generated[1:]]), config_version="cfg")
    assert card.overall.accuracy.den == 3 * (len(verified) + 1)
    assert card.execution_only.n_cases == len(generated) - 1


def snap_tables(case):
    import sqlglot

    return {t.name for t in sqlglot.parse_one(case.reference_sql, read="duckdb").find_all(
        sqlglot.exp.Table)}


def test_the_proposer_knows_no_project_by_name():
    demo = proj.load_project(location.REPO_ROOT)
    names = snap.SnapshotManifest.from_file(snap.manifest_path(
        demo.manifest_dir, snap.read_pinned(demo.manifest_dir))).tables
    for module in (propose, vocabulary, dedup, describe):
        source = inspect.getsource(module)
        assert not [n for n in names if n in source], module.__name__


# --------------------------------------------------------------------------- a model writes


def _model_config(tmp_path, generator):
    from sqleval_pipeline.configs import Configuration, LoadedConfig

    cfg = Configuration(name="writer", generator=generator, max_retries=0)
    return LoadedConfig(config=cfg, path=tmp_path / "writer.yaml", version="test")


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_model_configuration_writes_the_questions(demo, tmp_path, monkeypatch, kind,
                                                    fake_anthropic):
    from tests.generation.fakes import FakeOpenAI, server_error, text

    monkeypatch.setenv("TEST_KEY", "sk-test")
    asked = []

    def answer(req):
        body = req.json
        prompt = body["messages"][-1]["content"]
        asked.append(prompt)
        return text(json.dumps({"question": f"Model question number {len(asked)}?"}))

    if kind == "anthropic":
        fake = fake_anthropic
        fake.default = answer
        generator = {"kind": "anthropic", "model": "claude-test", "api_key_env": "TEST_KEY",
                     "base_url": fake.base_url, "thinking": "disabled"}
    else:
        fake = FakeOpenAI(default=answer).start()
        generator = {"kind": "openai", "model": "gpt-test", "api_key_env": "TEST_KEY",
                     "base_url": fake.base_url + "/v1"}
    try:
        writer = describe.model_writer(_model_config(tmp_path, generator))
        fake.queue(server_error(500))  # the first call fails: that proposal keeps its template
        report = demo.propose(4, seed=9, writer=writer, proposer=f"template+{writer.name}",
                              schema_of=lambda t: demo.catalog.render(curated=True, only=[t]))
        writer.close()
    finally:
        if kind == "openai":
            fake.stop()
    questions = [p.case.question for p in report.proposals]
    assert len(questions) == 4 and len(writer.failures) == 1
    assert questions[0] == report.proposals[0].draft.question
    assert questions[1:] == [f"Model question number {i}?" for i in range(1, 4)]
    # the model saw each query, its result and the as-of date
    for prompt, p in zip(asked, report.proposals[1:], strict=True):
        assert p.case.reference_sql in prompt and demo.manifest.as_of.isoformat() in prompt
    assert all(p.case.provenance.source.startswith(f"propose:template+{kind}:") for p in
               report.proposals)


def test_a_configuration_that_is_no_model_keeps_the_templates(tmp_path):
    assert describe.model_writer(_model_config(tmp_path, {"kind": "baseline"})) is None
    assert describe.model_writer(None) is None


# --------------------------------------------------------------------------- insurance


@pytest.fixture(scope="module")
def insurance(built_insurance):
    """The insurance example as a built sqleval project (tests.conftest.BuiltInsurance, a copy
    of this module's own), with its questions imported as the existing golden set."""
    project = built_insurance.copy("propose")
    res = sqleval(project, "golden", "import", str(FIXTURE / "questions.csv"), "--reviewer", "qa")
    assert res.returncode == 0, res.stdout + res.stderr
    return project


@pytest.mark.slow
def test_insurance_proposals_through_the_command(insurance, monkeypatch):
    monkeypatch.delenv("SQLEVAL_HOME", raising=False)  # the project's own build dir, as the command sees it
    env = Env(insurance)
    try:
        existing = env.cases()
        assert existing and all(c.status == "verified" for c in existing)
        res = sqleval(insurance, "golden", "propose", "-n", "12", "--seed", "4")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "12 proposal(s) added" in res.stdout
        target = env.project.golden_dir / "proposed.jsonl"
        proposed = load_golden(target).cases
        assert len(proposed) == 12 and {c.status for c in proposed} == {"generated"}
        report = env.propose(12, seed=4, existing=existing)  # the same proposals, in-process
        assert [(c.id, c.reference_sql) for c in proposed] == \
            [(p.case.id, p.case.reference_sql) for p in report.proposals]
        assert_new_and_checked(env, report, existing, 12)
        assert len({c.difficulty for c in proposed}) >= 4
        assert len({p.draft.table for p in report.proposals}) >= 3
        # the semantic layer's metrics are among the measures
        metrics = {t.sql for t in env.glossary.terms if t.kind == "metric" and t.sql}
        assert any(m in c.reference_sql for c in proposed for m in metrics)
        # a second run adds new ones only, and the golden set still verifies and loads
        res = sqleval(insurance, "golden", "propose", "-n", "5", "--seed", "4")
        assert res.returncode == 0, res.stdout + res.stderr
        after = load_golden(env.project.golden_dir).cases
        assert [c.id for c in after[:len(existing) + 12]] == \
            [c.id for c in [*existing, *proposed]]
        assert len(after) == len(existing) + 17
        before = {normalise_sql(s) for c in [*existing, *proposed]
                  for s in [c.reference_sql, *c.alternative_sqls] if s}
        fresh = [normalise_sql(c.reference_sql) for c in after[len(existing) + 12:]]
        assert len(set(fresh)) == 5 and not before & set(fresh)
        res = sqleval(insurance, "golden", "verify")
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        env.guard.close()


def test_an_unverified_case_with_a_frozen_result_stays_execution_only(demo):
    """Imported without a reviewer, a case may carry a frozen result nobody checked: its
    attempts are executed but never graded into accuracy, even a correct one."""
    from sqleval_pipeline.grading import grade_attempt
    from sqleval_pipeline.pipeline.records import Attempt

    case = demo.propose(1, seed=3).proposals[0].case
    frozen = freeze_cases([case.model_copy(update={"status": "verified"})], demo.serving,
                          demo.snapshot_id, demo.manifest.as_of)[0]
    unverified = frozen.model_copy(update={"status": "unverified"})
    att = Attempt(config_version="cfg", case_id=case.id, run_index=0, kind="sql", sql=case.reference_sql)
    ex = demo.guard.execute(case.reference_sql).to_execution("cfg", case.id, 0)
    assert grade_attempt(frozen, att, ex).outcome == "CORRECT"
    g = grade_attempt(unverified, att, ex)
    assert g.outcome is None and g.reason == "unverified_execution_only" and g.executed
