"""Exports of evaluations for other tools (docs/exports.md): ``sqleval export -o DIR``.

For each configuration version (at its newest scored batch) :func:`export` writes, under
``DIR/<name>@<hash8>/``, the stored scorecard as it is (``scorecard.json``) and one row per
case and run (``cases.parquet`` and ``cases.jsonl``, the same rows and columns: :data:`COLUMNS`),
and ``DIR/export.json`` lists what was written, with each version's overall accuracy, its
95% interval and the interval's method. Everything comes from the store; nothing is
recomputed. A run's result rows are not exported (``sqleval show CASE --json`` has them); its
row count is. A case's facets and tags (the scorecard's slices) are JSON text columns.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sqleval_pipeline.pipeline.casefile import CaseDetail, batch_details, check_partition
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError
from sqleval_pipeline.scoring.scorecard import CaseResult
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.textfiles import atomic_path
from sqleval_pipeline.pipeline.evaluation import latest_scorecard

FORMAT = "sqleval.export/1"
_S, _I, _B, _F = pa.string(), pa.int64(), pa.bool_(), pa.float64()
#: (column, Arrow type): the schema of cases.parquet and the keys of every cases.jsonl line
COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("partition_key", _S), ("config_name", _S), ("config_version", _S), ("batch_id", _S),
    ("snapshot_id", _S), ("case_id", _S), ("question", _S), ("band", _S), ("difficulty", _S),
    ("split", _S), ("cluster", _S), ("case_status", _S), ("case_passed", _B), ("case_flipped", _B),
    ("run_index", _I), ("answer_kind", _S), ("sql", _S), ("refusal_reason", _S),
    ("answer_error_code", _S), ("model", _S), ("execution_status", _S), ("guard_layer", _S),
    ("guard_reason", _S), ("execution_error_code", _S), ("result_rows", _I), ("result_capped", _B),
    ("elapsed_ms", _F), ("outcome", _S), ("success", _B), ("grade_reason", _S), ("mismatch", _S),
    ("grader_version", _S), ("diagnosis_judge", _S), ("diagnosis_category", _S),
    ("diagnosis_explanation", _S), ("cluster_derived", _B), ("facets", _S), ("tags", _S),
)
SCHEMA = pa.schema([pa.field(name, typ) for name, typ in COLUMNS])
PRIMARY_JUDGE = "rules"


def case_rows(detail: CaseDetail, passed: bool | None, flipped: bool | None,
              result: CaseResult | None = None) -> list[dict]:
    """One row per run of a case (:data:`COLUMNS`); the diagnosis is the primary judge's
    (``rules`` when it diagnosed the run, else the first judge by name). ``result``: the
    case in the scorecard (its facets, tags and whether its cluster was derived; None:
    unknown, the columns are null)."""
    c, b = detail.case, detail.batch
    facets = None if result is None else json.dumps(result.facets, ensure_ascii=False, sort_keys=True)
    tags = None if result is None else json.dumps(result.tags, ensure_ascii=False)
    derived = None if result is None else result.cluster_derived
    out = []
    for r in detail.runs:
        a, x, g = r.answer, r.execution, r.grade
        diag = next((d for d in r.diagnoses if d.judge == PRIMARY_JUDGE), r.diagnoses[0] if r.diagnoses else None)
        out.append({
            "partition_key": detail.partition_key, "config_name": detail.config_name,
            "config_version": detail.config_version, "batch_id": b.batch_id,
            "snapshot_id": b.snapshot_id, "case_id": c.id, "question": c.question, "band": c.band,
            "difficulty": c.difficulty, "split": c.split, "cluster": c.cluster,
            "case_status": c.status, "case_passed": passed, "case_flipped": flipped,
            "run_index": r.run_index, "answer_kind": a.kind, "sql": a.sql,
            "refusal_reason": a.refusal_reason, "answer_error_code": a.error_code, "model": a.model,
            "execution_status": x.status if x else None, "guard_layer": x.layer if x else None,
            "guard_reason": x.reason if x and x.status in ("refused", "timeout") else None,
            "execution_error_code": x.error_code if x else None,
            "result_rows": x.result.total_rows if x and x.result else None,
            "result_capped": x.capped if x else None, "elapsed_ms": x.elapsed_ms if x else None,
            "outcome": g.outcome if g else None, "success": g.success if g else None,
            "grade_reason": g.reason if g else None, "mismatch": g.mismatch if g else None,
            "grader_version": g.grader_version if g else None,
            "diagnosis_judge": diag.judge if diag else None,
            "diagnosis_category": diag.category if diag else None,
            "diagnosis_explanation": diag.explanation if diag else None,
            "cluster_derived": derived, "facets": facets, "tags": tags,
        })
    return out


def export(env: Environment, partition_keys: Sequence[str] | None, out_dir: Path,
           now: dt.datetime | None = None) -> list[Path]:
    """Export ``partition_keys`` (default: every version with a scorecard) into ``out_dir``;
    returns the files written (docs/exports.md)."""
    keys = list(dict.fromkeys(partition_keys or [
        k for k in env.store.partitions() if latest_scorecard(env, k)[0] is not None]))
    if not keys:
        raise EvaluationError(f"no scorecard in the store {env.store.root}: nothing to export")
    out_dir = Path(out_dir)
    written: list[Path] = []
    index = []
    for key in keys:
        check_partition(env, key)
        card, batch = latest_scorecard(env, key)
        if card is None:
            raise EvaluationError(f"{key} has no scorecard yet: run `sqleval run -c CONFIG` first")
        card_path = env.store.artifact(key, batch.batch_id, "scorecard.json")
        verdicts = {c.case_id: c for c in card.cases}
        rows = []
        for d in batch_details(env, key, batch.batch_id, max_rows=0):
            v = verdicts.get(d.case.id)
            rows += case_rows(d, v.passed if v else None, v.flipped if v else None, v)
        folder = out_dir / key
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(card_path, folder / "scorecard.json")
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        with atomic_path(folder / "cases.parquet") as tmp:
            pq.write_table(table, tmp)
        write_atomically(folder / "cases.jsonl", "".join(
            json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in rows))
        files = [folder / "scorecard.json", folder / "cases.parquet", folder / "cases.jsonl"]
        written += files
        acc = card.overall.accuracy
        index.append({"partition_key": key, "batch_id": batch.batch_id, "rows": len(rows),
                      "files": [str(f.relative_to(out_dir)) for f in files],
                      "accuracy": {"value": acc.value, "low": acc.ci.low if acc.ci else None,
                                   "high": acc.ci.high if acc.ci else None,
                                   "method": acc.ci.method if acc.ci else None},
                      "clusters": card.cluster_note()})
    manifest = out_dir / "export.json"
    write_atomically(manifest, json.dumps({
        "format": FORMAT, "created_at": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        "snapshot_id": env.snapshot_id, "evaluations": index,
        # batches left out because their batch.json cannot be read (each named, with why)
        "skipped_batches": [{"path": str(f), "reason": why} for f, why in sorted(env.store.unreadable.items())],
    }, indent=2) + "\n")
    return [*written, manifest]
