"""The pinned serving snapshot: the served models, GX-validated, frozen into a read-only file."""


import dagster as dg

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.warehouse.foundation import freeze


class SnapshotConfig(dg.Config):
    repin: bool = False
    """Accept a snapshot whose id differs from the pinned one (a recorded data change)."""


def build_snapshot_asset(served_keys: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name="serving_snapshot",
        group_name="snapshot",
        deps=served_keys,
        kinds={"duckdb", "great_expectations"},
        check_specs=[
            dg.AssetCheckSpec("matches_pinned_snapshot", asset="serving_snapshot", blocking=True,
                              description="The rebuilt snapshot id equals the pinned one."),
            dg.AssetCheckSpec("no_sensitive_objects", asset="serving_snapshot", blocking=True,
                              description="The serving file holds only the served tables."),
        ],
    )
    def serving_snapshot(context: dg.AssetExecutionContext, config: SnapshotConfig,
                         sqleval: SqlevalHome):
        """Copy the served models (the project's dbt selection) into a read-only serving
        file, validate it with Great Expectations and identify it by content hash. Nothing
        else of the warehouse is copied: "not served" means "not there"."""
        project = sqleval.project
        manifest_dir = sqleval.pins_dir
        pinned = snap.read_pinned(manifest_dir)
        manifest = freeze(project)
        path = snap.serving_path(project.home.snapshot_dir, manifest.snapshot_id)
        drift: list[str] = []
        if pinned is None or config.repin:
            snap.write_pinned(manifest_dir, manifest.snapshot_id)
            context.log.info(f"pinned snapshot {manifest.snapshot_id}")
        elif pinned != manifest.snapshot_id:
            old = snap.SnapshotManifest.from_file(snap.manifest_path(manifest_dir, pinned))
            drift = snap.compare_tables(old.tables, manifest.tables)
            if old.as_of != manifest.as_of:
                drift.insert(0, f"as-of date {old.as_of} → {manifest.as_of}")
            if not drift:  # another id always means other content: never accept it silently
                drift.append(f"the pinned manifest {pinned} and the built snapshot differ in what the "
                             "table fingerprints do not show (serving schema, selection or manifest content)")
        for note in manifest.skipped:
            context.log.info(f"not served: {note}")
        objects = snap.list_serving_objects(path)
        foreign = [".".join(o[1:]) for o in objects if o[1] != manifest.serving_schema]
        yield dg.MaterializeResult(
            data_version=dg.DataVersion(manifest.snapshot_id),  # downstream goes stale on a new snapshot
            metadata={
                "snapshot_id": manifest.snapshot_id,
                "as_of": manifest.as_of.isoformat(),
                "serving_file": dg.MetadataValue.path(str(path)),
                "tables": dg.MetadataValue.json({k: v.rows for k, v in manifest.tables.items()}),
                "selection": manifest.selection or "",
                "not_served": dg.MetadataValue.json(manifest.skipped),
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
                + "\nIf the data change is intended, rebuild with `sqleval snapshot build "
                "--repin` and re-freeze the golden set."
            )

    return serving_snapshot
