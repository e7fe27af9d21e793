"""The real Dagster webserver, driven over GraphQL exactly as the UI's Materialize button does.

`dagster-webserver -w workspace.yaml` is started on a free loopback port with the project's
own files (code location ``sqleval``), on a temporary sqleval home holding the session's
serving snapshot. The offline root baseline's partition is registered with the
``addDynamicPartition`` mutation, then the ``evaluate`` job is launched for it the way the
partitions dialog launches a single run (``partitionSetOrError.partition`` for the tags and
run config, then ``launchPipelineExecution`` with the job's assets and checks). The run must
succeed in the run worker the webserver starts, and the ``eval_grades`` materialization read
back through GraphQL must carry the batch id and the ``failing_cases`` table.

Then the asset graph's route: the evaluation assets selected on the implicit asset job
(``__ASSET_JOB``), as the asset graph's Materialize launches them. Its run must execute in
process (Dagster's in-process executor's own event) and carry the tags sqleval's coordinator
adds (``sqleval/trigger``, and ``sqleval/provider`` for a configuration with a provider).

The instance runs runs directly (sqleval's tagging ``DefaultRunCoordinator``): with a queued
coordinator a run launched from a webserver without a daemon stays QUEUED, and the daemon of
``dagster dev`` would start the ``new_configuration_versions`` sensor (RUNNING by default),
which registers and evaluates every active configuration by itself, next to this run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline import paths
from tests.conftest import home_over

pytestmark = pytest.mark.slow

LOCATION = "sqleval"
REPOSITORY = "__repository__"
JOB = "evaluate"
PARTITIONS_DEF = "config_versions"
REPO_SELECTOR = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}

STARTUP_TIMEOUT_S = 240
RUN_TIMEOUT_S = 300


# --------------------------------------------------------------------------- GraphQL

WORKSPACE_QUERY = """
query WorkspaceStatus {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on RepositoryLocation { name repositories { name pipelines { name } } }
          ... on PythonError { message stack }
        }
      }
    }
    ... on PythonError { message stack }
  }
}
"""

ADD_DYNAMIC_PARTITION_MUTATION = """
mutation AddDynamicPartition($repositorySelector: RepositorySelector!,
                             $partitionsDefName: String!, $partitionKey: String!) {
  addDynamicPartition(repositorySelector: $repositorySelector,
                      partitionsDefName: $partitionsDefName, partitionKey: $partitionKey) {
    __typename
    ... on AddDynamicPartitionSuccess { partitionsDefName partitionKey }
    ... on DuplicateDynamicPartitionError { message }
    ... on UnauthorizedError { message }
    ... on PythonError { message stack }
  }
}
"""

# what the Materialize button loads about the job: its assets (with their checks) and the
# partition set the job's partitions are launched through
JOB_ASSETS_QUERY = """
query LaunchAssetLoader($pipelineSelector: PipelineSelector!,
                        $repositorySelector: RepositorySelector!, $jobName: String!) {
  assetNodes(pipeline: $pipelineSelector) {
    assetKey { path }
    opNames
    jobNames
    isExecutable
    partitionDefinition { name type }
    assetChecksOrError {
      __typename
      ... on AssetChecks { checks { name jobNames } }
    }
  }
  partitionSetsOrError(repositorySelector: $repositorySelector, pipelineName: $jobName) {
    __typename
    ... on PartitionSets { results { name mode } }
    ... on PythonError { message }
  }
}
"""

# the UI's ConfigPartitionSelectionQuery: the tags and run config of one partition
CONFIG_PARTITION_SELECTION_QUERY = """
query ConfigPartitionSelectionQuery($repositorySelector: RepositorySelector!,
                                    $partitionSetName: String!, $partitionName: String!) {
  partitionSetOrError(repositorySelector: $repositorySelector,
                      partitionSetName: $partitionSetName) {
    __typename
    ... on PartitionSet {
      id
      partition(partitionName: $partitionName) {
        name
        solidSelection
        mode
        runConfigOrError {
          __typename
          ... on PartitionRunConfig { yaml }
          ... on PythonError { message stack }
        }
        tagsOrError {
          __typename
          ... on PartitionTags { results { key value } }
          ... on PythonError { message stack }
        }
      }
    }
    ... on PartitionSetNotFoundError { message }
    ... on PythonError { message stack }
  }
}
"""

# the UI's LAUNCH_PIPELINE_EXECUTION_MUTATION (runs/RunUtils.tsx)
LAUNCH_PIPELINE_EXECUTION_MUTATION = """
mutation LaunchPipelineExecution($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { id runId pipelineName } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message stack }
    ... on Error { message }
  }
}
"""

RUN_QUERY = """
query RunStatus($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run {
      runId
      jobName
      status
      creationTime
      startTime
      endTime
      tags { key value }
    }
    ... on RunNotFoundError { message }
    ... on PythonError { message }
  }
}
"""

RUN_EVENTS_QUERY = """
query RunEvents($runId: ID!, $afterCursor: String) {
  runOrError(runId: $runId) {
    __typename
    ... on Run {
      eventConnection(afterCursor: $afterCursor) {
        cursor
        hasMore
        events {
          __typename
          ... on MessageEvent { message level stepKey eventType }
          ... on ErrorEvent {
            error { className message stack cause { className message stack } }
          }
        }
      }
    }
  }
}
"""

LATEST_MATERIALIZATION_QUERY = """
query LatestMaterialization($assetKey: AssetKeyInput!, $partition: String!) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset {
      assetMaterializations(partitions: [$partition], limit: 1) {
        runId
        partition
        timestamp
        metadataEntries {
          __typename
          label
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue intRepr }
          ... on PathMetadataEntry { path }
          ... on JsonMetadataEntry { jsonString }
          ... on TableMetadataEntry {
            table {
              schema { columns { name type description } }
              records
            }
          }
        }
      }
    }
    ... on AssetNotFoundError { message }
  }
}
"""


class GraphQL:
    """POST to the webserver's /graphql endpoint over loopback (no proxy)."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/graphql"
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __call__(self, query: str, variables: dict | None = None, timeout: float = 60) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.url, data=body,
                                     headers={"Content-Type": "application/json"})
        with self._opener.open(req, timeout=timeout) as resp:
            doc = json.loads(resp.read())
        assert not doc.get("errors"), f"GraphQL errors: {json.dumps(doc['errors'], indent=1)}"
        return doc["data"]


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_signals() -> None:
    """The server must stop on SIGTERM even when the test runner was started with SIGINT and
    SIGTERM ignored (background jobs of a non-interactive shell): those dispositions are
    inherited through exec."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


class Webserver:
    def __init__(self, proc: subprocess.Popen, port: int, stdout: Path, stderr: Path):
        self.proc, self.port, self.stdout, self.stderr = proc, port, stdout, stderr
        self.gql = GraphQL(port)

    def log_tail(self, n: int = 6000) -> str:
        """The end of the server's stderr (its run workers' events) and stdout (its own and
        the code server's log lines)."""
        out = []
        for f in (self.stderr, self.stdout):
            text = f.read_text(errors="replace") if f.exists() else ""
            out.append(f"--- {f.name} ---\n{text[-n:]}")
        return "\n".join(out)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """/server_info answers, then the code location is loaded (the definitions parse the
        dbt project first, so that takes a while)."""
        deadline = time.monotonic() + timeout
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        info = None
        while time.monotonic() < deadline:
            self._check_alive()
            if info is None:
                try:
                    with opener.open(f"http://127.0.0.1:{self.port}/server_info", timeout=5) as r:
                        info = json.loads(r.read())
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    time.sleep(0.5)
                    continue
            try:
                data = self.gql(WORKSPACE_QUERY)["workspaceOrError"]
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.5)
                continue
            entries = {e["name"]: e for e in data.get("locationEntries", [])}
            entry = entries.get(LOCATION)
            if entry and entry["loadStatus"] == "LOADED":
                loc = entry["locationOrLoadError"]
                if loc and loc["__typename"] == "PythonError":
                    pytest.fail(f"code location {LOCATION} failed to load: {loc['message']}\n"
                                f"{''.join(loc['stack'])}\nserver log:\n{self.log_tail()}")
                if loc and loc["__typename"] == "RepositoryLocation":
                    return
            time.sleep(0.5)
        pytest.fail(f"the Dagster webserver on port {self.port} was not ready within "
                    f"{timeout:.0f} s (server_info: {info}); server log:\n{self.log_tail()}")

    def _check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            pytest.fail(f"dagster-webserver exited with code {code} before it was ready; "
                        f"log:\n{self.log_tail()}")

    def stop(self, timeout: float = 20) -> None:
        """Terminate the server by its pid, then its process group (the code server and the
        run workers it started), killing what is still there after the timeout."""
        proc = self.proc
        try:
            pgid = os.getpgid(proc.pid)
        except ProcessLookupError:
            pgid = None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        if pgid is not None:  # children of the server's own session (started below)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pgid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(1)


def start_webserver(home: Path, dagster_home: Path, logs: Path) -> Webserver:
    port = free_port()
    repo = location.REPO_ROOT
    bin_dir = Path(sys.executable).parent
    python_path = [str(repo), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(python_path)),
        "SQLEVAL_HOME": str(home),
        "SQLEVAL_PROJECT": str(repo / "sqleval.yaml"),
        "DAGSTER_HOME": str(dagster_home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DO_NOT_TRACK": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    stdout, stderr = logs / "webserver.out", logs / "webserver.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            [str(bin_dir / "dagster-webserver"), "-w", str(repo / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(port)],
            cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True, preexec_fn=_default_signals)
    return Webserver(proc, port, stdout, stderr)


# --------------------------------------------------------------------------- the steps


def _version_of(config_file: Path) -> str:
    from sqleval_pipeline.configs import load_config
    from sqleval_pipeline.project import load_project

    project = load_project(location.REPO_ROOT / "sqleval.yaml")
    return load_config(config_file, project.root, project=project).version


def offline_root_baseline():
    """The active configuration that needs no key and no network (the embedded ``baseline``
    generator) and is gated against no other one: the root of the baselines, so its gate needs
    no other partition evaluated first."""
    from sqleval_pipeline.configs import load_configs

    configs = load_configs()
    offline = [c for c in configs if c.config.active and c.config.generator.kind == "baseline"]
    roots = [c for c in offline if c.config.baseline is None]
    assert len(roots) == 1, (f"expected one active offline configuration without a baseline, "
                             f"found {[c.partition_key for c in roots]} among "
                             f"{[c.partition_key for c in configs]}")
    return roots[0]


def add_partition(gql: GraphQL, key: str) -> None:
    result = gql(ADD_DYNAMIC_PARTITION_MUTATION, {
        "repositorySelector": REPO_SELECTOR, "partitionsDefName": PARTITIONS_DEF,
        "partitionKey": key})["addDynamicPartition"]
    assert result["__typename"] == "AddDynamicPartitionSuccess", result
    assert result["partitionKey"] == key


def launch_as_materialize_button(gql: GraphQL, key: str) -> str:
    """One partition of the ``evaluate`` job, launched as the UI's partitions dialog launches
    a single run: the partition's tags and run config from its partition set, the job's assets
    and their checks as the selection, the UI's ``dagster/from_ui`` tag."""
    loaded = gql(JOB_ASSETS_QUERY, {
        "pipelineSelector": {**REPO_SELECTOR, "pipelineName": JOB},
        "repositorySelector": REPO_SELECTOR, "jobName": JOB})
    assets = [a for a in loaded["assetNodes"] if a["isExecutable"]]
    assert assets, f"job {JOB} has no assets: {loaded}"
    assert {(a["partitionDefinition"] or {}).get("name") for a in assets} == {PARTITIONS_DEF}
    sets = loaded["partitionSetsOrError"]
    assert sets["__typename"] == "PartitionSets" and len(sets["results"]) == 1, sets
    partition_set = sets["results"][0]["name"]
    checks = [{"assetKey": {"path": a["assetKey"]["path"]}, "name": c["name"]}
              for a in assets if a["assetChecksOrError"]["__typename"] == "AssetChecks"
              for c in a["assetChecksOrError"]["checks"] if JOB in c["jobNames"]]

    found = gql(CONFIG_PARTITION_SELECTION_QUERY, {
        "repositorySelector": REPO_SELECTOR, "partitionSetName": partition_set,
        "partitionName": key})["partitionSetOrError"]
    assert found["__typename"] == "PartitionSet", found
    partition = found["partition"]
    assert partition is not None, f"partition {key} is not in {partition_set}"
    assert partition["tagsOrError"]["__typename"] == "PartitionTags", partition["tagsOrError"]
    assert partition["runConfigOrError"]["__typename"] == "PartitionRunConfig", partition
    tags = [t for t in partition["tagsOrError"]["results"] if t["key"] != "dagster/from_ui"]
    tags.append({"key": "dagster/from_ui", "value": "true"})

    execution_params = {
        "mode": partition["mode"] or "default",
        "runConfigData": partition["runConfigOrError"]["yaml"] or "",
        "executionMetadata": {"tags": tags},
        "selector": {
            **REPO_SELECTOR,
            "pipelineName": JOB,
            "assetSelection": [{"path": a["assetKey"]["path"]} for a in assets],
            "assetCheckSelection": checks,
        },
    }
    result = gql(LAUNCH_PIPELINE_EXECUTION_MUTATION,
                 {"executionParams": execution_params})["launchPipelineExecution"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def launch_from_asset_graph(gql: GraphQL, key: str) -> str:
    """The evaluation assets of one partition, launched as the asset graph's Materialize
    launches a selection: the implicit asset job with the assets and their checks, and the
    partition as a tag (no partition set, no job)."""
    loaded = gql(JOB_ASSETS_QUERY, {
        "pipelineSelector": {**REPO_SELECTOR, "pipelineName": JOB},
        "repositorySelector": REPO_SELECTOR, "jobName": JOB})
    assets = [a for a in loaded["assetNodes"] if a["isExecutable"]]
    checks = [{"assetKey": {"path": a["assetKey"]["path"]}, "name": c["name"]}
              for a in assets if a["assetChecksOrError"]["__typename"] == "AssetChecks"
              for c in a["assetChecksOrError"]["checks"]]
    execution_params = {
        "mode": "default", "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": key},
                                       {"key": "dagster/from_ui", "value": "true"}]},
        "selector": {**REPO_SELECTOR, "pipelineName": "__ASSET_JOB",
                     "assetSelection": [{"path": a["assetKey"]["path"]} for a in assets],
                     "assetCheckSelection": checks},
    }
    result = gql(LAUNCH_PIPELINE_EXECUTION_MUTATION,
                 {"executionParams": execution_params})["launchPipelineExecution"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def engine_messages(gql: GraphQL, run_id: str) -> list[str]:
    """Every message of the run's event log."""
    out, cursor = [], None
    while True:
        run = gql(RUN_EVENTS_QUERY, {"runId": run_id, "afterCursor": cursor})["runOrError"]
        conn = run["eventConnection"]
        out += [ev.get("message") or "" for ev in conn["events"]]
        if not conn["hasMore"]:
            return out
        cursor = conn["cursor"]


def run_errors(gql: GraphQL, run_id: str) -> str:
    """The run's ERROR-level events and every error with its cause, as text."""
    lines, cursor = [], None
    while True:
        run = gql(RUN_EVENTS_QUERY, {"runId": run_id, "afterCursor": cursor})["runOrError"]
        conn = run.get("eventConnection") or {"events": [], "hasMore": False, "cursor": cursor}
        for ev in conn["events"]:
            err = ev.get("error")
            if ev.get("level") != "ERROR" and not err:
                continue
            lines.append(f"[{ev['__typename']}] step={ev.get('stepKey')} {ev.get('message', '')}")
            while err:
                lines.append(f"  {err.get('className')}: {err['message']}".rstrip())
                lines.extend("    " + s.rstrip() for s in err.get("stack") or [])
                err = err.get("cause")
        if not conn["hasMore"]:
            break
        cursor = conn["cursor"]
    return "\n".join(lines) or "(no error events)"


def wait_for_run(server: Webserver, run_id: str, timeout: float = RUN_TIMEOUT_S) -> dict:
    deadline = time.monotonic() + timeout
    run: dict = {}
    while time.monotonic() < deadline:
        run = server.gql(RUN_QUERY, {"runId": run_id})["runOrError"]
        assert run["__typename"] == "Run", run
        if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            return run
        time.sleep(1)
    pytest.fail(f"run {run_id} still {run.get('status')} after {timeout:.0f} s; errors so far:\n"
                f"{run_errors(server.gql, run_id)}\nserver log:\n{server.log_tail()}")


def failing_cases_in_grades(grades_parquet: Path) -> dict[str, list[str | None]]:
    """Case id → its runs' outcomes, for every case with a run that is not a success. The
    successes, as docs/grading.md defines them: CORRECT and CORRECT_FACTS for answerable cases,
    DEFERRED_CORRECTLY for a case that should be refused (written out here, not imported)."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT case_id, list(outcome ORDER BY run_index) FROM read_parquet(?) "
            "GROUP BY case_id HAVING bool_or(outcome IS NULL OR outcome NOT IN "
            "('CORRECT', 'CORRECT_FACTS', 'DEFERRED_CORRECTLY'))",
            [str(grades_parquet)]).fetchall()
    finally:
        con.close()
    return dict(rows)


# --------------------------------------------------------------------------- the test


@pytest.fixture
def ui_home(serving_snapshot, tmp_path, monkeypatch):
    """A fresh sqleval home with the session's serving snapshot, and its Dagster instance."""
    home = home_over(serving_snapshot, tmp_path / "home")
    dagster_home = paths.Home(home).dagster_home
    dagster_home.mkdir()
    # a configuration with a provider, known to the run coordinator only: its run is tagged
    # on launch and fails at its first step (no such version in the project), calling nobody
    configs = tmp_path / "provider_configs"
    configs.mkdir()
    (configs / "svc.yaml").write_text("name: remote-svc\ngenerator: {kind: http, url: 'http://127.0.0.1:9/sql'}\n")
    (dagster_home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: sqleval_pipeline.run_queue\n"
        "  class: ProviderTaggingDirectRunCoordinator\n"
        f"  config:\n    project_file: {location.REPO_ROOT / 'sqleval.yaml'}\n"
        f"    configs_dir: {configs}\n")
    monkeypatch.setenv("SQLEVAL_HOME", str(home))
    monkeypatch.setenv("SQLEVAL_PROJECT", str(location.REPO_ROOT / "sqleval.yaml"))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    return home, dagster_home


def test_materialize_button_evaluates_a_partition_in_the_webserver(ui_home, tmp_path):
    home, dagster_home = ui_home
    loaded = offline_root_baseline()
    key = loaded.partition_key
    assert key == f"{loaded.name}@{loaded.version}" and len(loaded.version) == 8

    started = time.monotonic()
    server = start_webserver(home, dagster_home, tmp_path)
    try:
        server.wait_ready()
        ready_s = time.monotonic() - started
        add_partition(server.gql, key)
        run_id = launch_as_materialize_button(server.gql, key)
        run = wait_for_run(server, run_id)
        if run["status"] != "SUCCESS":
            errors = run_errors(server.gql, run_id)
            print(errors)
            pytest.fail(f"run {run_id} of {JOB} for {key} ended {run['status']}:\n{errors}")
        tags = {t["key"]: t["value"] for t in run["tags"]}
        print(f"\n[ui-run] partition {key} run {run_id}: server ready in {ready_s:.1f} s; "
              f"launch->end {run['endTime'] - run['creationTime']:.2f} s, "
              f"start->end {run['endTime'] - run['startTime']:.2f} s "
              f"(creation {run['creationTime']:.3f}, start {run['startTime']:.3f}, "
              f"end {run['endTime']:.3f})")
        assert run["jobName"] == JOB
        assert tags.get("dagster/partition") == key, tags

        found = server.gql(LATEST_MATERIALIZATION_QUERY, {
            "assetKey": {"path": ["eval_grades"]}, "partition": key})["assetOrError"]

        # the asset graph's route: the implicit asset job, in process, tagged on launch
        graph_id = launch_from_asset_graph(server.gql, key)
        graph_run = wait_for_run(server, graph_id)
        assert graph_run["status"] == "SUCCESS", run_errors(server.gql, graph_id)
        assert graph_run["jobName"] == "__ASSET_JOB"
        messages = engine_messages(server.gql, graph_id)
        assert any(m.startswith("Executing steps in process") for m in messages), messages[:20]
        assert not any("multiprocess executor" in m for m in messages)
        graph_tags = {t["key"]: t["value"] for t in graph_run["tags"]}
        assert graph_tags.get("dagster/partition") == key and graph_tags.get("sqleval/trigger") == "ui"
        assert "sqleval/provider" not in graph_tags  # the offline baseline calls no provider
        remote = "remote-svc@" + _version_of(tmp_path / "provider_configs" / "svc.yaml")
        add_partition(server.gql, remote)
        remote_id = launch_from_asset_graph(server.gql, remote)
        remote_run = wait_for_run(server, remote_id)
        remote_tags = {t["key"]: t["value"] for t in remote_run["tags"]}
        assert remote_tags.get("sqleval/provider") == "http:127.0.0.1:9", remote_tags
    finally:
        server.stop()

    assert found["__typename"] == "Asset", found
    mats = found["assetMaterializations"]
    assert len(mats) == 1, f"no materialization of eval_grades for {key}"
    mat = mats[0]
    assert mat["partition"] == key and mat["runId"] == run_id, mat
    entries = {e["label"]: e for e in mat["metadataEntries"]}

    batch = entries.get("batch_id")
    assert batch is not None and batch["__typename"] == "TextMetadataEntry", sorted(entries)
    batch_id = batch["text"]
    # the store's layout (sqleval_pipeline/pipeline/store.py): <build>/store/runs/<key>/<batch id>/
    grades = paths.Home(home).store / "runs" / key / batch_id / "grades.parquet"
    assert grades.is_file(), f"{grades} is missing"
    failing = failing_cases_in_grades(grades)

    table = entries.get("failing_cases")
    assert table is not None, (f"eval_grades has no failing_cases entry; metadata labels: "
                               f"{sorted(entries)}")
    assert table["__typename"] == "TableMetadataEntry", table["__typename"]
    columns = {c["name"] for c in table["table"]["schema"]["columns"]}
    assert {"case_id", "outcome"} <= columns, columns
    records = [json.loads(r) for r in table["table"]["records"]]
    in_table = {r.get("case_id") for r in records}
    assert len(records) == len(failing) and in_table == set(failing), (
        f"failing_cases has {len(records)} records; the batch's grades ({grades}) have "
        f"{len(failing)} distinct case(s) with a run that is not a success; only in the table: "
        f"{sorted(in_table - set(failing))}; only in the grades (their outcomes per run): "
        f"{ {cid: failing[cid] for cid in sorted(set(failing) - in_table)} }")
