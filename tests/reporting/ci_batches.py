"""Small synthetic evaluated batches for the CI-format tests (JUnit, annotations, PR summary).

A batch is written the way the stages store it — ``batch.json``, the answers, guarded
executions, grades and diagnoses as record files, ``scorecard.json`` built from those grades,
and, for a candidate gated against a baseline, ``diff.json``, ``gate.json`` and
``comparisons.json`` — so the renderings are tested on files, fast, without dbt or Dagster.
Each case is described by :class:`Spec`: the outcome of every run and what the runs said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sqleval_pipeline.pipeline.comparisons import Comparison, GateReport
from sqleval_pipeline.pipeline.records import Attempt, Diagnosis, Execution, Grade, save_records
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.scoring import build_scorecard, diff, gate
from sqleval_pipeline.pipeline.store import BatchInfo

GRADER = "test-grader-1"


@dataclass
class Spec:
    """One case: the outcome of each run (None: not graded, an execution-only case)."""

    case_id: str
    outcomes: list[str | None]
    band: str = "answerable"
    sql: str = "SELECT 1 AS n"
    mismatch: str | None = "expected 1 row(s), got 2"
    refusal: str = "I cannot answer that"
    diagnosis: tuple[str, str, str] | None = ("rules", "wrong_filter", "filters differ")
    guard: tuple[str, str, str] | None = None  # (layer, reason, message) of a refused run
    cluster: str = "c0"


@dataclass
class Batch:
    folder: Path
    partition: str
    batch_id: str
    specs: list[Spec] = field(default_factory=list)


def _records(partition: str, spec: Spec, i: int, outcome: str | None):
    version = partition.split("@")[1]
    key = {"config_version": version, "case_id": spec.case_id, "run_index": i}
    attempt = execution = diagnosis = None
    if outcome in ("DEFERRED_CORRECTLY", "DEFERRED_WRONGLY"):
        attempt = Attempt(**key, kind="refusal", refusal_reason=spec.refusal)
    elif outcome == "ERROR":
        attempt = Attempt(**key, kind="error", error_code="provider_timeout",
                          error_message="the provider did not answer in 60 s")
    else:
        attempt = Attempt(**key, kind="sql", sql=spec.sql)
        if spec.guard is not None and outcome == "WRONG":
            layer, reason, message = spec.guard
            execution = Execution(**key, status="refused", layer=layer, reason=reason,
                                  message=message, elapsed_ms=2.0)
        else:
            execution = Execution(**key, status="ok", elapsed_ms=250.0,
                                  result=ResultSet(columns=["n"], types=["INTEGER"], rows=[[1]]))
    grade = Grade(**key, outcome=outcome, reason="match" if outcome in ("CORRECT", "CORRECT_FACTS")
                  else (outcome or "execution_only").lower(),
                  mismatch=spec.mismatch if outcome == "WRONG" else None, grader_version=GRADER,
                  band=spec.band, difficulty="simple", split="dev", cluster=spec.cluster,
                  case_status="verified" if outcome is not None else "unverified")
    if outcome in ("WRONG", "DEFERRED_WRONGLY") and spec.diagnosis is not None:
        judge, category, why = spec.diagnosis
        diagnosis = Diagnosis(**key, judge=judge, category=category, explanation=why,
                              grader_version=GRADER)
    return attempt, execution, grade, diagnosis


def write_batch(store: Path, partition: str, batch_id: str, specs: list[Spec],
                created_at: str = "2026-05-04T10:11:12.345678+00:00") -> Batch:
    """The batch folder ``<store>/runs/<partition>/<batch_id>`` with every stage's records and
    the scorecard (no comparison yet)."""
    folder = store / "runs" / partition / batch_id
    folder.mkdir(parents=True)
    attempts, executions, grades, diagnoses = [], [], [], []
    for spec in specs:
        for i, outcome in enumerate(spec.outcomes):
            a, x, g, d = _records(partition, spec, i, outcome)
            attempts.append(a)
            grades.append(g)
            if x is not None:
                executions.append(x)
            if d is not None:
                diagnoses.append(d)
    for name, records in (("attempts", attempts), ("executions", executions), ("grades", grades),
                          ("diagnoses", diagnoses)):  # none: JSON Lines, as the stages store it
        save_records(folder / f"{name}.{'parquet' if records else 'jsonl'}", records)
    name, version = partition.split("@")
    build_scorecard(grades, diagnoses, config_version=version, resamples=60).save(folder / "scorecard.json")
    info = BatchInfo(batch_id=batch_id, partition_key=partition, config_name=name,
                     config_version=version, snapshot_id="snap-000000000000", golden_hash="0" * 12,
                     runs=max(len(s.outcomes) for s in specs), case_ids=[s.case_id for s in specs],
                     status="complete", created_at=created_at, finished_at=created_at)
    (folder / "batch.json").write_text(info.model_dump_json(indent=2))
    return Batch(folder, partition, batch_id, specs)


def gate_against(candidate: Batch, baseline: Batch | None) -> GateReport:
    """``comparisons.json`` of the candidate (and the declared baseline's ``diff.json`` and
    ``gate.json``): compared with ``baseline``, or with nothing (every comparison skipped)."""
    from sqleval_pipeline.scoring import Scorecard

    comparisons = []
    if baseline is None:
        comparisons.append(Comparison(kind="baseline", status="skipped", reason="no baseline configured"))
    else:
        base = Scorecard.load(baseline.folder / "scorecard.json")
        cand = Scorecard.load(candidate.folder / "scorecard.json")
        d = diff(base, cand, resamples=60)
        g = gate(base, cand, [])
        (candidate.folder / "diff.json").write_text(d.to_json())
        (candidate.folder / "gate.json").write_text(g.to_json())
        status = "inconclusive" if g.inconclusive else "failed" if not g.passed else "passed"
        comparisons.append(Comparison(
            kind="baseline", baseline_partition=baseline.partition, baseline_batch=baseline.batch_id,
            status=status, reason=g.message, baseline_accuracy=g.baseline_accuracy,
            candidate_accuracy=g.candidate_accuracy, delta=g.delta, newly_failing=d.newly_failing,
            newly_passing=d.newly_passing))
    comparisons += [Comparison(kind="previous_version", status="skipped", reason="no earlier version"),
                    Comparison(kind="previous_batch", status="skipped", reason="first batch of this version")]
    report = GateReport(partition_key=candidate.partition, batch_id=candidate.batch_id,
                        comparisons=comparisons)
    (candidate.folder / "comparisons.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2))
    return report


def write_golden(path: Path, ids: list[str], *, blank_every: int = 3) -> None:
    """A golden file holding ``ids`` in that order, with a blank line after every
    ``blank_every`` cases (so a case's line is not its position)."""
    lines = []
    for n, case_id in enumerate(ids, start=1):
        lines.append(json.dumps({
            "id": case_id, "question": f"How many things for {case_id}?", "reference_sql": "SELECT 1",
            "difficulty": "simple", "band": "answerable", "cluster": "c0", "split": "dev",
            "status": "verified", "provenance": {"source": "test", "author": "test"}}))
        if n % blank_every == 0:
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def line_of(path: Path, case_id: str) -> int:
    """The 1-based line of ``case_id`` in a JSON Lines file, read independently."""
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip() and json.loads(line)["id"] == case_id:
            return n
    raise AssertionError(f"{case_id} not in {path}")
