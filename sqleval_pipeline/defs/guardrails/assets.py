"""The hostile suite as an asset: every case must be blocked at a non-prompt layer, and the
serving snapshot must be byte-for-byte unchanged afterwards (both blocking checks). A case of
the project's own files that only reads a served table it names is a warning, *not hostile on
this project* (logged, in the metadata and the report), not a failure."""

import json
from typing import Optional

import dagster as dg

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.guard.hostile import run_suite
from sqleval_pipeline.guard.policy import project_policy
from sqleval_pipeline.warehouse.foundation import hostile_suite


class GuardrailConfig(dg.Config):
    timeout_s: float = 5.0
    """Statement timeout for the run: resource bombs are contained within it."""
    kill_grace_s: Optional[float] = None
    """Time a worker has to answer after the timeout before it is killed (a bomb DuckDB cannot
    interrupt): the guard policy's (2 s bundled), or this when lower."""


@dg.asset(
    group_name="guardrails", deps=["serving_snapshot"], kinds={"duckdb"},
    check_specs=[
        dg.AssetCheckSpec("all_hostile_cases_blocked", asset="guardrail_suite", blocking=True,
                          description="No write, sensitive read or escape got through"),
        dg.AssetCheckSpec("snapshot_checksum_unchanged", asset="guardrail_suite", blocking=True,
                          description="SHA-256 of the serving file is the same after the suite"),
    ],
)
def guardrail_suite(context: dg.AssetExecutionContext, config: GuardrailConfig,
                    sqleval: SqlevalHome):
    """Run the hostile suite, instantiated over the project's served tables and its sensitive
    models, through the guard; question cases are answered by an adversarial double that
    obeys every injection, so only non-prompt layers can stop them."""
    project = sqleval.project
    _pinned, manifest, path = snap.pinned_snapshot(sqleval.pins_dir, sqleval.home.snapshot_dir)
    suite, skipped, notes = hostile_suite(project, manifest)
    for template_id, reason in skipped:
        context.log.info(f"hostile case {template_id} not instantiated: {reason}")
    for note in notes:
        context.log.info(f"hostile suite: {note}")
    report_path = sqleval.home.root / "reports" / "guardrails.json"
    policy = project_policy(project, manifest)
    with GuardedExecutor(path, as_of=manifest.as_of, policy=policy) as guard:
        report = run_suite(suite, guard, timeout_s=config.timeout_s, kill_grace_s=config.kill_grace_s)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(report_path, json.dumps(report.to_json(), indent=2, default=str) + "\n")
    not_hostile = [f"{v.case_id}: {v.warning}" for v in report.not_hostile]
    for line in not_hostile:
        context.log.warning(f"hostile case not hostile on this project: {line}")
    summary = report.summary()
    through = report.got_through
    lines = ["| category | cases | blocked | filter | database | sandbox | cap | by SQL error | not hostile "
             "| got through |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cat, row in sorted(summary.items()):
        lines.append(f"| {cat} | {row['cases']} | {row['blocked']} | {row.get('by_filter', 0)} | "
                     f"{row.get('by_database', 0)} | {row.get('by_sandbox', 0)} | "
                     f"{row.get('by_cap', 0)} | {row.get('blocked_by_error', 0)} | "
                     f"{row.get('not_hostile', 0)} | {row['got_through']} |")
    yield dg.MaterializeResult(data_version=dg.DataVersion(policy.version), metadata={
        "guard_policy": policy.version,
        "cases": len(report.verdicts),
        "not_instantiated": dg.MetadataValue.json([f"{t}: {r}" for t, r in skipped]),
        "instantiation_notes": dg.MetadataValue.json(list(notes)),
        "not_hostile": dg.MetadataValue.json(not_hostile),
        "got_through": len(through),
        "unproven": len(report.failures) - len(through),
        "seconds": round(report.seconds, 1),
        "statement_timeout_s": report.statement_timeout_s,
        "kill_grace_s": report.kill_grace_s,
        "per_category": dg.MetadataValue.md("\n".join(lines)),
        "report": dg.MetadataValue.path(str(report_path)),
    })
    yield dg.AssetCheckResult(
        check_name="all_hostile_cases_blocked", passed=not report.failures,
        metadata={"failures": dg.MetadataValue.json(
            [f"{v.case_id}: {v.verdict} {v.status} {v.reason or ''}" for v in report.failures]),
            "not_hostile": dg.MetadataValue.json(not_hostile)},
    )
    yield dg.AssetCheckResult(
        check_name="snapshot_checksum_unchanged", passed=report.checksum_unchanged,
        metadata={"after": report.checksum_after},
    )
