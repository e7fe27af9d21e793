"""The Dagster definitions load, and the foundation job really materializes end to end."""

import dagster as dg
import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline import snapshot as snap


@pytest.mark.slow
def test_definitions_load_with_the_expected_assets(session_home):
    from sqleval_pipeline.definitions import build_definitions

    # a live instance: earlier tests may have closed the one Dagster's state storage points at
    with dg.instance_for_test():
        defs = build_definitions()
        graph = defs.resolve_asset_graph()
        assert defs.resolve_job_def("foundation") is not None
        assert defs.resolve_job_def("evaluate") is not None
        # the implicit asset job (the UI's Materialize, `dagster asset materialize`, backfills)
        # runs in process, as the CLI does
        implicit = defs.resolve_implicit_global_asset_job_def()
        assert implicit.executor_def is dg.in_process_executor
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"serving_snapshot", "golden_set", "judge_calibration", "guardrail_suite", "marts/fct_orders", "marts/mart_orders_daily",
            "raw/orders", "hr/salaries", "pii/customer_contacts"} <= keys
    snapshot_parents = {k.to_user_string() for k in graph.get(dg.AssetKey("serving_snapshot")).parent_keys}
    # the snapshot depends on exactly the served models (the demo serves path:models/marts)
    marts = {f"marts/{p.stem}" for p in (location.REPO_ROOT / "dbt_project" / "models" / "marts").glob("*.sql")}
    assert snapshot_parents == marts
    def group(key: str) -> str:
        return graph.get(dg.AssetKey(key.split("/"))).group_name

    assert group("marts/fct_orders") == "served" and group("hr/salaries") == "warehouse"
    assert group("staging/stg_orders") == "warehouse" and group("raw/orders") == "raw"


@pytest.mark.slow
def test_workspace_points_at_the_definitions(session_home):
    """What `dagster dev -w workspace.yaml` loads: the module and attribute it names resolve to
    Definitions (from the repository root, its working directory)."""
    import importlib

    import yaml

    doc = yaml.safe_load((location.REPO_ROOT / "workspace.yaml").read_text())
    (entry,) = doc["load_from"]
    target = entry["python_module"]
    assert (location.REPO_ROOT / target.get("working_directory", ".")).resolve() == location.REPO_ROOT.resolve()
    with dg.instance_for_test():
        module = importlib.import_module(target["module_name"])
        entry_point = getattr(module, target["attribute"])
        # a @dg.definitions entry point: importing the module built nothing, Dagster calls it
        assert not isinstance(entry_point, dg.Definitions)
        defs = entry_point()
        assert isinstance(defs, dg.Definitions)
        assert defs.resolve_job_def("evaluate") is not None


@pytest.mark.slow
def test_foundation_materializes_through_dagster(demo_build, demo_test_suite):
    """The demo's foundation, from raw data to its test suite, through Dagster: the session's
    build is that run (tests.conftest._build_demo: every group but the hostile suite, which
    runs once in tests/guard/test_hostile_suite.py; the guardrail asset and its checks run in
    every foreign build: tests/test_project.py, the wheel, the SQLite benchmark. Drift stopping
    the foundation is tests/test_project.py's). Here what it materialized and left behind."""
    run = demo_build.foundation
    materialized, checks = run["materialized"], run["checks"]
    home = demo_build.home
    pinned = snap.read_pinned(location.SNAPSHOT_MANIFEST_DIR)
    assert materialized["serving_snapshot"]["snapshot_id"] == pinned  # the committed pin
    assert materialized["golden_set"]["cases"] >= 60
    assert "marts/fct_orders" in materialized and "raw/orders" in materialized
    assert "guardrail_suite" not in materialized
    assert checks["serving_snapshot:matches_pinned_snapshot"]
    assert checks["serving_snapshot:no_sensitive_objects"]
    assert checks["golden_set:reproduces_on_snapshot"]
    assert all(checks.values()), checks
    # the suite the run distilled is the one an evaluation over the build finds, verified intact
    assert materialized["test_suite"]["suite"] == demo_test_suite.digest
    assert (home.snapshot_dir / f"{pinned}.duckdb").exists()
    # dbt writes into the build dir, never into the dbt project; per-run folders are cleaned up
    assert (home.root / "dbt_target" / "manifest.json").exists()
    assert not list((home.root / "dbt_target").glob("dagster-*"))
    assert home.warehouse.exists()
    # the run is recorded in the instance the UI opens
    assert (home.dagster_home / "dagster.yaml").exists()
    with dg.DagsterInstance.from_config(str(home.dagster_home)) as instance:
        record = instance.get_run_by_id(run["run_id"])
        assert record is not None and record.status == dg.DagsterRunStatus.SUCCESS
        assert record.job_name == "foundation"


def test_a_domain_folder_loads_itself(tmp_path, monkeypatch):
    """Adding an asset is one file: a new module in a domain folder is picked up, with its
    checks, jobs and schedules, and a domain's ``definitions(ctx)`` is merged in."""
    import importlib
    import sys

    from sqleval_pipeline.definitions import domain_definitions, domains

    root = tmp_path / "extra_defs"
    (root / "alpha").mkdir(parents=True)
    (root / "beta").mkdir()
    (root / "__init__.py").write_text("")
    (root / "not_a_domain.py").write_text("import dagster as dg\n@dg.asset\ndef stray(): ...\n")
    (root / "alpha" / "__init__.py").write_text("")
    (root / "alpha" / "assets.py").write_text(
        "import dagster as dg\n"
        "@dg.asset(group_name='alpha')\ndef first(): return 1\n"
        "@dg.asset_check(asset=first)\ndef first_ok(): return dg.AssetCheckResult(passed=True)\n")
    (root / "alpha" / "jobs.py").write_text(
        "import dagster as dg\nalpha_job = dg.define_asset_job('alpha_job', selection='first')\n"
        "@dg.schedule(job=alpha_job, cron_schedule='0 3 * * *')\ndef alpha_nightly(): return {}\n")
    (root / "beta" / "__init__.py").write_text(
        "import dagster as dg\n"
        "def definitions(ctx):\n"
        "    @dg.asset(name=ctx['name'], deps=['first'])\n"
        "    def made(): ...\n"
        "    return dg.Definitions(assets=[made])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module("extra_defs")
    try:
        found = domains(package)
        assert [m.__name__ for m in found] == ["extra_defs.alpha", "extra_defs.beta"]
        merged = dg.Definitions.merge(*(domain_definitions(d, {"name": "made_for_ctx"}) for d in found))
        # resolving definitions reads the current instance's state storage: a test instance of
        # its own, so what an earlier test left in Dagster's context cannot leak in
        with dg.instance_for_test():
            keys = {k.to_user_string() for k in merged.resolve_asset_graph().get_all_asset_keys()}
            assert keys == {"first", "made_for_ctx"}
            assert merged.resolve_job_def("alpha_job") is not None
            assert [s.name for s in merged.schedules] == ["alpha_nightly"]
            assert [k.name for k in merged.resolve_asset_graph().asset_check_keys] == ["first_ok"]
    finally:
        for name in [n for n in sys.modules if n.startswith("extra_defs")]:
            del sys.modules[name]


@pytest.mark.slow
def test_every_module_level_definition_is_loaded(session_home):
    """Walk the defs package independently of the loader: every asset, job, schedule and
    sensor defined at module level in a domain file is in the project's definitions."""
    import importlib
    import pkgutil

    import sqleval_pipeline.defs as package
    from sqleval_pipeline.definitions import build_definitions

    assets, jobs, schedules, sensors = set(), set(), set(), set()
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, dg.AssetsDefinition):
                assets |= {k.to_user_string() for k in value.keys}
            elif isinstance(value, dg.ScheduleDefinition):
                schedules.add(value.name)
            elif isinstance(value, dg.SensorDefinition):
                sensors.add(value.name)
            elif hasattr(value, "name") and type(value).__name__ == "UnresolvedAssetJobDefinition":
                jobs.add(value.name)
    assert assets and jobs and schedules and sensors
    with dg.instance_for_test():
        defs = build_definitions()
        loaded = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
        assert assets <= loaded
        assert jobs <= {j.name for j in defs.jobs}
        assert schedules == {s.name for s in defs.schedules}
        assert sensors == {s.name for s in defs.sensors}
