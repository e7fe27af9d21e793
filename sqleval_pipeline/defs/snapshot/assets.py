"""The pinned serving snapshot: GX-validated marts frozen into a read-only DuckDB file."""

from pathlib import Path

import dagster as dg

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.defs.resources import SqlevalHome, dbt_project
from sqleval_pipeline.defs.warehouse.assets import commerce_dbt_models
from sqleval_pipeline.warehouse.rawgen import AS_OF


def mart_keys() -> list[dg.AssetKey]:
    """Asset keys of the dbt models in the served (allowlisted) schemas: the translator puts
    each model in the group named after its schema."""
    return sorted((spec.key for spec in commerce_dbt_models.specs
                   if spec.group_name in snap.ALLOWLISTED_SCHEMAS), key=lambda k: k.path)


class SnapshotConfig(dg.Config):
    repin: bool = False
    """Accept a snapshot whose id differs from the pinned one (a recorded data change)."""


@dg.asset(
    group_name="snapshot",
    deps=mart_keys(),
    kinds={"duckdb", "great_expectations"},
    check_specs=[
        dg.AssetCheckSpec("matches_pinned_snapshot", asset="serving_snapshot", blocking=True,
                          description="The rebuilt snapshot id equals snapshots/pinned."),
        dg.AssetCheckSpec("no_sensitive_objects", asset="serving_snapshot", blocking=True,
                          description="The serving file holds only main.<mart> tables."),
    ],
)
def serving_snapshot(context: dg.AssetExecutionContext, config: SnapshotConfig, sqleval: SqlevalHome):
    """Validate the marts with Great Expectations, copy them into a read-only serving file and
    identify it by content hash. Sensitive schemas (hr, pii) are never copied."""
    home = sqleval.home
    manifest_dir = Path(sqleval.manifest_dir)
    pinned = snap.read_pinned(manifest_dir)
    manifest = snap.freeze_snapshot(
        home.warehouse, home.snapshot_dir, manifest_dir, AS_OF,
        dbt_manifest=dbt_project().manifest_path,
    )
    path = snap.serving_path(home.snapshot_dir, manifest.snapshot_id)
    drift: list[str] = []
    if pinned is None or config.repin:
        snap.write_pinned(manifest_dir, manifest.snapshot_id)
        context.log.info(f"pinned snapshot {manifest.snapshot_id}")
    elif pinned != manifest.snapshot_id:
        old = snap.SnapshotManifest.from_file(snap.manifest_path(manifest_dir, pinned))
        drift = snap.compare_tables(old.tables, manifest.tables)
    objects = snap.list_serving_objects(path)
    foreign = [".".join(o[1:]) for o in objects if o[1] != snap.SERVING_SCHEMA]
    yield dg.MaterializeResult(
        metadata={
            "snapshot_id": manifest.snapshot_id,
            "as_of": manifest.as_of.isoformat(),
            "path": dg.MetadataValue.path(str(path)),
            "tables": dg.MetadataValue.json({k: v.rows for k, v in manifest.tables.items()}),
            "expectations_passed": manifest.expectations_passed or 0,
            "dbt_manifest_hash": manifest.dbt_manifest_hash or "",
        }
    )
    yield dg.AssetCheckResult(
        check_name="matches_pinned_snapshot",
        passed=not drift,
        metadata={"pinned": pinned or manifest.snapshot_id, "built": manifest.snapshot_id,
                  "differences": dg.MetadataValue.json(drift)},
    )
    yield dg.AssetCheckResult(
        check_name="no_sensitive_objects",
        passed=not foreign,
        metadata={"objects": len(objects), "unexpected": dg.MetadataValue.json(foreign)},
    )
    if drift:
        raise snap.SnapshotDrift(
            f"snapshot drift: built {manifest.snapshot_id} but {pinned} is pinned:\n  "
            + "\n  ".join(drift)
            + "\nIf the data change is intended, rebuild with `sqleval snapshot build --repin` "
            "and re-freeze the golden set."
        )
