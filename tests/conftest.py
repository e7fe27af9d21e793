"""Shared fixtures: the warehouse and the serving snapshot are built once per test session."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline import paths
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.processes import tune_gc

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

# The suite never reads or writes the checkout's build directory (.sqleval): a developer who
# ran `make demo` and a clean clone in CI see the same thing (a dbt manifest left there by the
# demo once hid a test that needed `dbt parse`). Each process (an xdist worker too) gets an
# empty build directory of its own; a test that needs one builds it or sets its own.
os.environ["SQLEVAL_HOME"] = tempfile.mkdtemp(prefix="sqleval-test-home-")
atexit.register(shutil.rmtree, os.environ["SQLEVAL_HOME"], ignore_errors=True)
os.environ.pop("DAGSTER_HOME", None)
# The CLI's consoles are made at import, before any fixture runs: a width exported by the
# shell (COLUMNS=80) would fix theirs and wrap what the CLI tests read.
os.environ.pop("COLUMNS", None)


#: the guard limits of the tests that run resource bombs: the bombs are stopped by a 1 s statement
#: timeout (the product's default is 30 s; the mechanism is the same at any value)
BOMB_LIMITS = {"statement_timeout_s": 1.0, "kill_grace_s": 0.5}
#: the statement timeout of a guard that runs hostile cases only (bombs, statements refused
#: before they run, a few tiny reads), seconds: also the `--guardrail-timeout` of the foreign
#: builds, whose guardrail suite is all hostile. A guard that also runs ordinary or large queries
#: keeps BOMB_LIMITS (a query of a fraction of a second must not meet the timeout on a loaded
#: machine); a hostile case expected to meet the cap runs under the bundled limits.
HOSTILE_ONLY_TIMEOUT_S = 0.5
#: ... and the time a worker then has to answer before it is killed (the foreign builds'
#: `--guardrail-kill-grace`; the bundled policy's is 2 s)
HOSTILE_ONLY_KILL_GRACE_S = 0.5
HOSTILE_ONLY_LIMITS = {"statement_timeout_s": HOSTILE_ONLY_TIMEOUT_S, "kill_grace_s": HOSTILE_ONLY_KILL_GRACE_S}


def demo_tables() -> list[str]:
    """The tables the bundled demo project serves (from its committed pinned manifest)."""
    manifest_dir = location.REPO_ROOT / "snapshots"
    sid = snap.read_pinned(manifest_dir)
    return sorted(snap.SnapshotManifest.from_file(snap.manifest_path(manifest_dir, sid)).tables)


def at_once(*calls):
    """Run each callable in a thread of its own, all started together; (their results in
    order, None for one that raised; the exceptions raised)."""
    import threading

    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i, call):
        try:
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def cpu_time_of(call):
    """``(call(), CPU seconds this thread spent on it)``, the garbage collector paused meanwhile:
    what a bound on an algorithm's cost measures. Neither the process's CPU time (other threads
    of a test worker count there: a sandbox's readers, a timer an earlier test left) nor a
    collection of the garbage earlier tests left, which may fall in any call (seen: 0.67 s of
    process CPU for a decision of 8 ms, with three workers on two cores)."""
    import gc
    import time

    paused = gc.isenabled()
    gc.disable()
    try:
        t = time.thread_time()
        result = call()
        return result, time.thread_time() - t
    finally:
        if paused:
            gc.enable()


def demo_policy(**kwargs):
    """The bundled guard policy over the demo's served tables."""
    from sqleval_pipeline.guard.policy import load_policy

    return load_policy(served=demo_tables(), **kwargs)


@pytest.fixture(autouse=True)
def _loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback calls to the provider fakes must never go through a configured proxy."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def fake_anthropic():
    """A loopback fake of the Anthropic Messages API (tests/generation/fakes.py)."""
    from tests.generation.fakes import FakeAnthropic

    with FakeAnthropic() as fake:
        yield fake


@dataclass(frozen=True)
class BuiltSnapshot:
    home: paths.Home
    manifest_dir: Path
    snapshot_id: str
    path: Path
    manifest: snap.SnapshotManifest


def run_dbt(args: list[str], warehouse: Path, target: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "dbt"
    env = {**os.environ, "SQLEVAL_WAREHOUSE": str(warehouse)}
    return subprocess.run(
        [str(exe), *args, "--project-dir", str(location.DBT_PROJECT_DIR), "--profiles-dir",
         str(location.DBT_PROJECT_DIR), "--target-path", str(target), "--log-path", str(target / "logs")],
        cwd=location.DBT_PROJECT_DIR, env=env, capture_output=True, text=True, check=False,
    )


def share_between_workers(tmp_path_factory, path: Path, name: str) -> None:
    """Under pytest-xdist, ``path`` (a folder) is a link to ``name`` in the run's temporary
    folder, shared by the workers: what one builds there (a test suite of the session's
    snapshot, the same in every worker) the others reuse, through the product's own lock
    (two builders of one suite: one builds, the other reuses it, as two evaluations would).
    Without xdist, ``path`` is a folder of this process's own."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        path.mkdir(parents=True, exist_ok=True)
        return
    shared = tmp_path_factory.getbasetemp().parent / name
    shared.mkdir(exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(shared, target_is_directory=True)


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder that ``build(folder)`` filled, once per run: under pytest-xdist, ``name`` in the
    run's temporary folder, built by the first worker that asks and reused by the other (under
    a lock; a marker written when ``build`` returned, so a failed or interrupted build starts
    again from nothing); without xdist, a folder of this process's own."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from sqleval_pipeline.pipeline.store import file_lock

    base = tmp_path_factory.getbasetemp().parent
    folder, done = base / name, base / f"{name}.built"
    with file_lock(base / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


#: what the session's build of the demo materializes: the foundation job without the hostile
#: suite (the demo's cases run once, in tests/guard/test_hostile_suite.py; the guardrail asset
#: and its checks run in every foreign build)
SESSION_GROUPS = ("raw", "warehouse", "served", "snapshot", "golden")


def _build_demo(root: Path) -> None:
    """The demo's foundation through Dagster, as `sqleval build` runs it: raw data generated and
    loaded, `dbt build` (models, data tests, unit tests), the GX-validated serving snapshot
    checked against the committed pin, the golden set verified on it and its test suite
    distilled; in ``root/home`` (the build dir), ``root/manifests`` (a copy of the committed
    pins) and what the run materialized and its checks' verdicts in ``root/foundation.json``."""
    import json

    from sqleval_pipeline import project as proj
    from sqleval_pipeline.orchestrate import materialize

    manifests = root / "manifests"
    shutil.copytree(location.SNAPSHOT_MANIFEST_DIR, manifests)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SQLEVAL_HOME", str(root / "home"))
        mp.delenv("SQLEVAL_PROJECT", raising=False)
        mp.delenv("DAGSTER_HOME", raising=False)  # the run sets the build dir's: restored
        try:
            summary = materialize(list(SESSION_GROUPS), manifest_dir=str(manifests))
        finally:
            proj.select(None)
    (root / "foundation.json").write_text(json.dumps(
        {"run_id": summary.run_id, "materialized": summary.materialized, "checks": summary.checks}, default=str))


@dataclass(frozen=True)
class DemoBuild:
    """The session's build of the demo (:func:`_build_demo`), shared by the workers: read it,
    never write to it (the neighbour sets excepted: the product locks those itself)."""

    root: Path

    @property
    def home(self) -> paths.Home:
        return paths.Home(self.root / "home")

    @property
    def manifest_dir(self) -> Path:
        return self.root / "manifests"

    @property
    def foundation(self) -> dict:
        """The run's ``materialized`` (asset → metadata) and ``checks`` (check → passed)."""
        import json

        return json.loads((self.root / "foundation.json").read_text())


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory) -> DemoBuild:
    """:class:`DemoBuild`, once per run (:func:`built_once`)."""
    return DemoBuild(built_once(tmp_path_factory, "demo-build", _build_demo))


@pytest.fixture(scope="session")
def built_warehouse(demo_build, tmp_path_factory) -> paths.Home:
    """A build dir of this process's own holding the session build's raw files, warehouse and
    dbt target (copies); its neighbour sets are the session build's (a link)."""
    home = paths.Home(tmp_path_factory.mktemp("sqleval_home"))
    built = demo_build.home
    shutil.copytree(built.raw_dir, home.raw_dir)
    shutil.copy2(built.warehouse, home.warehouse)
    shutil.copytree(built.root / "dbt_target", home.root / "dbt_target",
                    ignore=shutil.ignore_patterns("dagster-*"))
    home.snapshot_dir.mkdir()
    (home.snapshot_dir / "neighbours").symlink_to(built.snapshot_dir / "neighbours", target_is_directory=True)
    return home


@pytest.fixture(scope="session")
def serving_snapshot(built_warehouse, demo_build, tmp_path_factory) -> BuiltSnapshot:
    """The session build's serving snapshot (GX-validated, the committed pin) copied into this
    process's build dir, with its manifest in a temporary folder (the committed snapshots/ is
    never touched)."""
    manifest_dir = tmp_path_factory.mktemp("snapshot_manifests")
    shutil.copytree(demo_build.manifest_dir, manifest_dir, dirs_exist_ok=True)
    snapshot_id = snap.read_pinned(manifest_dir)
    for f in demo_build.home.snapshot_dir.glob(f"{snapshot_id}.duckdb*"):
        shutil.copy2(f, built_warehouse.snapshot_dir / f.name)
    return BuiltSnapshot(
        home=built_warehouse,
        manifest_dir=manifest_dir,
        snapshot_id=snapshot_id,
        path=snap.serving_path(built_warehouse.snapshot_dir, snapshot_id),
        manifest=snap.SnapshotManifest.from_file(snap.manifest_path(manifest_dir, snapshot_id)),
    )


@pytest.fixture(scope="session")
def demo_test_suite(serving_snapshot):
    """The demo's test suite (the product's default neighbour set, the committed golden set) on
    the session snapshot, as an evaluation over the session build finds it: the suite the
    session build distilled, verified and reused (the neighbour sets are the build's); its handle."""
    from sqleval_pipeline.pipeline.environment import environment
    from sqleval_pipeline.pipeline.suite_checks import current_suite

    home = serving_snapshot.home
    return current_suite(environment(home=home, manifest_dir=serving_snapshot.manifest_dir,
                                     dbt_target=home.root / "dbt_target"))


#: the insurance example (tests/fixtures/projects/insurance): a dbt project that is not the demo
INSURANCE = Path(__file__).parent / "fixtures" / "projects" / "insurance"


@dataclass(frozen=True)
class BuiltInsurance:
    """The insurance example as a sqleval project: `sqleval init` (serving ``tag:serving``,
    as of 2024-06-30, schema ``restricted`` sensitive) and `sqleval build` (guardrails: the
    project's own hostile suite, at the hostile-only timeout and kill grace), once per run.
    ``project`` is never written to by a test: :meth:`copy` gives a module a project of its own."""

    root: Path  # holds dbt/ (the example, copied) and the projects over it
    project: Path
    init_output: str
    build_output: str

    def copy(self, name: str) -> Path:
        """A copy of the built project beside it (its ``../dbt`` is the same dbt project),
        with a Dagster instance of its own (made on first use)."""
        target = self.root / f"{name}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
        shutil.copytree(self.project, target, ignore=shutil.ignore_patterns("dagster_home"))
        return target


#: the insurance project's own hostile suite (``paths.hostile``): a few templates of each layer,
#: on the project's tables and each of its sensitive relations. The bundled suite runs on a
#: foreign dbt build in tests/test_wheel.py and on an insurance-like snapshot in
#: tests/guard/test_hostile_templates.py; here, what matters is the build's guardrail asset on
#: the project's own cases and sensitive relations
INSURANCE_HOSTILE = (
    {"id": "ins-write", "category": "writes", "sql": "DELETE FROM {table}", "expect": ["filter"]},
    {"id": "ins-stacked", "category": "stacked", "sql": "SELECT 1; DROP TABLE {table}", "expect": ["filter"]},
    {"id": "ins-file", "category": "file_read", "sql": "SELECT * FROM read_csv('/etc/passwd')", "expect": ["filter"]},
    {"id": "ins-sensitive", "category": "sensitive_access", "sql": "SELECT * FROM {sensitive}",
     "expect": ["filter"], "for_each": "sensitive"},
    {"id": "ins-bomb", "category": "resource_bombs",
     "sql": "SELECT count(*) FROM {table} a, {table} b, range(1000000) r1, range(1000000) r2"},
)


def _build_insurance(root: Path) -> None:
    """`sqleval init` and `sqleval build` of the insurance example in ``root`` (its dbt project
    copied to ``dbt/``, the sqleval project in ``project/``, whose hostile suite is
    :data:`INSURANCE_HOSTILE`); what they printed in ``built.json``."""
    import json

    from typer.testing import CliRunner

    from sqleval_pipeline import project as proj
    from sqleval_pipeline.cli import app

    shutil.copytree(INSURANCE, root / "dbt", ignore=shutil.ignore_patterns(
        "target", "logs", "*.duckdb", "sqleval.yaml", "evals"))
    runner = CliRunner()
    outputs = {}
    init = ["init", str(root / "project"), "--dbt-project", str(root / "dbt"), "--select", "tag:serving",
            "--as-of", "2024-06-30", "--sensitive-schemas", "restricted"]
    build = ["--project", str(root / "project"), "build", "--guardrail-timeout", str(HOSTILE_ONLY_TIMEOUT_S),
             "--guardrail-kill-grace", str(HOSTILE_ONLY_KILL_GRACE_S)]
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SQLEVAL_HOME", raising=False)  # the project keeps its own build dir
        mp.delenv("SQLEVAL_PROJECT", raising=False)
        mp.delenv("DAGSTER_HOME", raising=False)  # a run sets the project's: restored
        try:
            for step, args in (("init", init), ("build", build)):
                res = runner.invoke(app, args)
                assert res.exit_code == 0, f"sqleval {step}:\n{res.output}"
                outputs[step] = res.output
                if step == "init":  # the project's own hostile suite, as a user declares one
                    spec = root / "project" / "sqleval.yaml"
                    text = spec.read_text(encoding="utf-8")
                    assert "\npaths:\n" in text and "hostile" not in text, text
                    spec.write_text(text.replace("\npaths:\n", "\npaths:\n  hostile: [evals/hostile.jsonl]\n"),
                                    encoding="utf-8")
                    (root / "project" / "evals" / "hostile.jsonl").write_text(
                        "".join(json.dumps(c) + "\n" for c in INSURANCE_HOSTILE), encoding="utf-8")
        finally:
            proj.select(None)  # the CLI selects a project for the process: forget it
    (root / "built.json").write_text(json.dumps(outputs))


@pytest.fixture(scope="session")
def built_insurance(tmp_path_factory) -> BuiltInsurance:
    """:class:`BuiltInsurance`, built once per run (:func:`built_once`)."""
    import json

    root = built_once(tmp_path_factory, "insurance", _build_insurance)
    outputs = json.loads((root / "built.json").read_text())
    return BuiltInsurance(root, root / "project", outputs["init"], outputs["build"])


def home_over(snapshot: BuiltSnapshot, home: Path) -> Path:
    """``home`` (made here) as a build directory over the session's build: its snapshots
    (serving files, neighbour sets) and the dbt target they were frozen from (the manifest and
    the data tests that ran) are linked, everything else is its own. Without the dbt target a
    version would run ``dbt parse`` and the test suite would be distilled again, on neighbours
    that keep no data test."""
    home.mkdir(parents=True)
    (home / "snapshots").symlink_to(snapshot.home.snapshot_dir)
    (home / "dbt_target").symlink_to(snapshot.home.root / "dbt_target")
    return home


def cli_home(snapshot: BuiltSnapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A build directory of its own for a command under test (``tmp_path/home``, made the
    process's ``SQLEVAL_HOME`` and ``DAGSTER_HOME``), over the session's build (:func:`home_over`)."""
    home = home_over(snapshot, tmp_path / "home")
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    return home


@pytest.fixture()
def session_home(serving_snapshot, tmp_path, monkeypatch) -> Path:
    """The process's build dir (``SQLEVAL_HOME``) made ``tmp_path/home`` over the session's build
    (:func:`home_over`): the demo's dbt manifest is there, so loading the definitions or
    versioning a configuration runs no `dbt parse` first (loading a project from nothing, parse
    included, is what the UI test and every foreign build do)."""
    home = home_over(serving_snapshot, tmp_path / "home")
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    return home


@pytest.fixture()
def env(session_home, serving_snapshot, tmp_path):
    """The evaluation environment over the session snapshot, with a store of its own; its build
    dir is the process's (:func:`session_home`), so configurations are versioned from it too."""
    import shutil

    from sqleval_pipeline.pipeline import evaluation as ev

    manifests = tmp_path / "manifests"
    shutil.copytree(serving_snapshot.manifest_dir, manifests)
    home = paths.Home(session_home)
    return ev.environment(home=home, manifest_dir=manifests, dbt_target=home.root / "dbt_target")


@pytest.fixture(autouse=True)
def _fast_tests_run_no_dbt(request, monkeypatch):
    """The fast lane is hermetic: a test not marked slow that runs dbt in process, or builds the
    project's Dagster definitions, fails, naming what to do (dbt builds and parses, and Dagster
    runs, belong to the slow lane)."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} runs dbt ({args[1:2]}) but is not marked slow: "
                             "mark it @pytest.mark.slow, or give it a prepared manifest")

    from sqleval_pipeline.warehouse import dbt

    monkeypatch.setattr(dbt, "run_dbt", refuse)
    # ... nor does it build the project's Dagster definitions (a domain package of the test's
    # own, as the loader's tests use, is fine)
    from sqleval_pipeline import definitions

    build = definitions.build_definitions

    def refuse_definitions(*args, package=definitions.defs_package, **kwargs):
        if package is definitions.defs_package:
            raise AssertionError(f"{request.node.nodeid} builds the project's Dagster definitions but is "
                                 "not marked slow: mark it @pytest.mark.slow")
        return build(*args, package=package, **kwargs)

    monkeypatch.setattr(definitions, "build_definitions", refuse_definitions)


#: fixtures that build something heavy (the demo's foundation through Dagster and dbt, its
#: warehouse and serving snapshot, the insurance example's `sqleval build`): a test that needs
#: one is in the slow lane
_SLOW_FIXTURES = frozenset({"demo_build", "built_warehouse", "serving_snapshot", "built_insurance"})


#: the test modules that take longest (seconds of one worker, measured on two cores: 74 … 12),
#: longest first. ``make test`` hands each module to a worker as one unit (``--dist loadscope``)
#: in collection order (``--no-loadscope-reorder``): these start first and the many short modules
#: fill in the end, so both workers finish together (longest-processing-time-first scheduling;
#: run last, the long ones left one worker idle for a minute). Order only: no test depends on it,
#: and a module missing here keeps its place after them.
LONGEST_FIRST = (
    "tests/test_project.py", "tests/test_definitions.py", "tests/test_wheel.py", "tests/test_cli_signals.py",
    "tests/golden/test_sqlite_benchmark.py", "tests/test_cli_output.py", "tests/test_ui_webserver.py",
    "tests/guard/test_hostile_templates.py", "tests/suite/test_grading.py", "tests/reporting/test_report_browser.py",
    "tests/test_evaluation.py", "tests/guard/test_hostile_suite.py", "tests/warehouse/test_snapshot.py",
    "tests/warehouse/test_rawgen.py", "tests/suite/test_cli.py", "tests/guard/test_cache_bounds.py",
    "tests/test_cli.py", "tests/golden/test_propose.py",
)


#: folders whose modules share a session fixture that a worker computes for itself: the
#: reporting tests' ``evaluated`` store (tests/reporting/conftest.py: three evaluations of the
#: demo, ~15 s). Under ``--dist loadscope`` each folder is one unit of work, so one worker
#: computes it (as one module's tests share a module fixture); without xdist nothing changes.
SHARED_FIXTURE_FOLDERS = ("tests/reporting/",)


def pytest_configure(config):
    """A test process runs the product in process: it gets the product's garbage collector
    settings (those of a ``sqleval`` command and of a Dagster code server)."""
    tune_gc()


def pytest_collection_finish(session):
    """What collection imported (the package, Dagster, every test module) lives as long as
    the process: frozen out of the collector's walks, as a command freezes its imports."""
    tune_gc(freeze=True)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope``, with the folders of :data:`SHARED_FIXTURE_FOLDERS` as units."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndSharedFolders(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            folder = next((f for f in SHARED_FIXTURE_FOLDERS if nodeid.startswith(f)), None)
            return folder or super()._split_scope(nodeid)

    return ModulesAndSharedFolders(config, log)


def pytest_collection_modifyitems(config, items):
    """``pytest -m "not slow"`` is the fast lane: every test that needs the built warehouse (or
    the snapshot made from it) is marked slow automatically, besides those marked by hand.
    The longest modules are collected first (:data:`LONGEST_FIRST`; a stable sort, so the order
    within a module and among the others is kept)."""
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))
