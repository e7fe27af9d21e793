"""The golden set, verified to reproduce on the pinned snapshot."""



import dagster as dg

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.golden.verify import verify_cases
from sqleval_pipeline.golden.loader import load_golden
from sqleval_pipeline.golden.stats import stats_markdown, validate_coverage
from sqleval_pipeline.pipeline.suite_checks import build_suite
from sqleval_pipeline.suite.audit import weak_cases
from sqleval_pipeline.golden.model import golden_hash


@dg.asset(
    group_name="golden",
    deps=["serving_snapshot"],
    kinds={"python"},
    check_specs=[
        dg.AssetCheckSpec("reproduces_on_snapshot", asset="golden_set", blocking=True,
                          description="Every reference query returns its frozen result."),
        dg.AssetCheckSpec("coverage", asset="golden_set",
                          description="Minimums (docs/golden-set.md) per difficulty and band."),
    ],
)
def golden_set(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
    """Load and validate the project's golden files and re-run every reference (snapshot
    drift stops the evaluation with the cases named)."""
    project = sqleval.project
    golden = load_golden(project.golden_dir, **project.taxonomy)
    pinned, manifest, serving = snap.pinned_snapshot(sqleval.pins_dir, sqleval.home.snapshot_dir)
    drifts = verify_cases(golden.cases, serving, pinned, manifest.as_of)
    coverage = validate_coverage(golden.cases, project.difficulties)

    content = golden_hash(golden.cases)
    yield dg.MaterializeResult(
        data_version=dg.DataVersion(content),  # evaluations go stale when the set changes
        metadata={
            "golden_hash": content,
            "cases": len(golden),
            "snapshot_id": pinned,
            "golden_dir": dg.MetadataValue.path(str(project.golden_dir)),
            "stats": dg.MetadataValue.md(stats_markdown(golden.cases, project.difficulties)),
        }
    )
    yield dg.AssetCheckResult(
        check_name="reproduces_on_snapshot", passed=not drifts,
        metadata={"drifted_cases": dg.MetadataValue.json([str(d) for d in drifts])},
    )
    yield dg.AssetCheckResult(
        check_name="coverage", passed=not coverage,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"shortfalls": dg.MetadataValue.json(coverage)},
    )
    if drifts:
        raise snap.SnapshotDrift(
            f"snapshot drift: {len(drifts)} golden case(s) no longer reproduce on {pinned}:\n  "
            + "\n  ".join(str(d) for d in drifts[:20])
        )


@dg.asset(group_name="golden", deps=[golden_set], kinds={"duckdb"})
def test_suite(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
    """Neighbour databases of the pinned snapshot and each case's distilled suite
    (docs/test-suite.md): what grading runs an answer right on the snapshot on. Reused when
    built for the same snapshot and golden set with intact files; only changed cases are
    distilled again."""
    handle = build_suite(sqleval.environment())
    cases = handle.suite.data.cases.values()
    rates = [c.kill_rate for c in cases if c.kill_rate is not None]
    weak = sorted(c.case_id for c in weak_cases(handle.suite.data))
    yield dg.MaterializeResult(
        data_version=dg.DataVersion(handle.digest),  # grades go stale when the suite changes
        metadata={
            "suite": handle.digest,
            "suite_file": dg.MetadataValue.path(str(handle.path)),
            "neighbours": len(handle.suite.by_id),
            "cases": len(handle.suite.data.cases),
            "mean_kill_rate": round(sum(rates) / len(rates), 3) if rates else 0.0,
            "weak_cases": dg.MetadataValue.json(weak),
        })
