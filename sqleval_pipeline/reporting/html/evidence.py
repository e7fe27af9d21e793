"""The security evidence pack: the guard policy in force, the database settings as DuckDB
reports them, every hostile case with the layer that stopped it, and the serving snapshot's
checksum before and after the suite (docs/report.md).

:func:`collect_evidence` gathers it from the project (policy file, pinned snapshot) and the
hostile suite's last report (``<build>/reports/guardrails.json``, written by the
``guardrail_suite`` asset and ``sqleval guardrails run --json``); nothing is run again except
opening the serving file read-only, locked down exactly as the guard opens it, to read its
settings back. :func:`~sqleval_pipeline.reporting.html.page.write_evidence` renders the pack as one self-contained HTML file; the
main report (:mod:`sqleval_pipeline.reporting.html.page`) shows the same data in its
guardrails section.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import duckdb
import sqlglot

from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline import __version__
from sqleval_pipeline.guard.database import open_guarded_database, settings_for
from sqleval_pipeline.guard.policy import ALLOWED_TABLE_FUNCTIONS, DEFAULT_POLICY_PATH
from sqleval_pipeline.snapshot import file_checksum

#: where the hostile suite's report is kept, under the build directory
GUARDRAILS_REPORT = Path("reports") / "guardrails.json"
#: the guard layers, in the order a statement meets them
LAYERS = ("filter", "database", "sandbox", "cap")


def build_root(env: Environment) -> Path:
    """The build directory of the environment (its store is ``<build>/store``)."""
    return env.store.root.parent


@dataclass
class HostileRow:
    """One hostile case as the suite judged it."""

    case_id: str
    category: str
    kind: str
    verdict: str
    blocked_by: str | None
    reason: str | None
    message: str | None
    sql: str | None = None  # the SQL run (for a question case: what the double answered)
    question: str | None = None  # the question sent (question cases)
    expect: list[str] = field(default_factory=list)
    failed: bool = False


@dataclass
class CategoryRow:
    """The suite's cases of one class: how many, and which layer stopped them."""

    category: str
    cases: int
    by_layer: dict[str, int]
    blocked_by_error: int
    declined: int
    got_through: int


@dataclass
class Guardrails:
    """The hostile suite's last report."""

    ran_at: str | None
    passed: bool
    snapshot_file: str
    checksum_before: str
    checksum_after: str
    checksum_unchanged: bool
    seconds: float | None
    totals: dict[str, int]
    categories: list[CategoryRow]
    cases: list[HostileRow]
    failures: list[str]
    unproven: list[str]

    @property
    def layer_totals(self) -> dict[str, int]:
        return {layer: sum(c.by_layer.get(layer, 0) for c in self.categories) for layer in LAYERS}


@dataclass
class Setting:
    name: str
    value: str | None
    expected: str
    ok: bool


@dataclass
class Evidence:
    """Everything the evidence pack shows."""

    generated_at: str
    versions: dict[str, str]
    project: str
    snapshot_id: str
    as_of: str
    serving_file: str
    checksum_now: str | None
    policy_version: str
    policy_file: str
    tables: list[str]
    schemas: list[str]
    functions: list[str]
    table_functions: list[str]
    denied_names: list[str]
    denied_patterns: list[str]
    limits: dict[str, Any]
    sandbox: dict[str, Any]
    settings: list[Setting]
    settings_error: str | None
    guardrails: Guardrails | None
    notes: list[str] = field(default_factory=list)


def _versions() -> dict[str, str]:
    return {"sqleval": __version__, "duckdb": duckdb.__version__,
            "sqlglot": getattr(sqlglot, "__version__", "unknown"), "python": platform.python_version()}


def load_guardrails(path: Path) -> Guardrails | None:
    """The hostile suite's report at ``path`` (None when the suite has not run)."""
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    ran_at = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")
    categories = [CategoryRow(
        category=cat, cases=row.get("cases", 0),
        by_layer={layer: row.get(f"by_{layer}", 0) for layer in LAYERS},
        blocked_by_error=row.get("blocked_by_error", 0), declined=row.get("declined", 0),
        got_through=row.get("got_through", 0)) for cat, row in sorted(data.get("summary", {}).items())]
    cases = [HostileRow(
        case_id=c["case_id"], category=c["category"], kind=c.get("kind", "sql"),
        verdict=c["verdict"], blocked_by=c.get("blocked_by"), reason=c.get("reason"),
        message=c.get("message"), sql=c.get("sql"), question=c.get("question"),
        expect=list(c.get("expect") or []), failed=bool(c.get("failed")))
        for c in data.get("cases", [])]
    return Guardrails(
        ran_at=ran_at, passed=bool(data.get("passed")),
        snapshot_file=Path(str(data.get("snapshot", ""))).name,
        checksum_before=data.get("checksum_before", ""), checksum_after=data.get("checksum_after", ""),
        checksum_unchanged=bool(data.get("checksum_unchanged")), seconds=data.get("seconds"),
        totals=dict(data.get("totals") or {}), categories=categories, cases=cases,
        failures=list(data.get("failures") or []), unproven=list(data.get("unproven") or []))


def read_settings(serving: Path, policy) -> tuple[list[Setting], str | None]:
    """The serving file opened as the guard opens it (read-only, locked down), its settings
    read back from ``duckdb_settings()``; (settings, None) or ([], why it could not)."""
    want = {name: expected for name, _, expected in settings_for(policy)}
    want |= {"access_mode": "read_only", "temp_directory": ""}
    try:
        root = open_guarded_database(serving, policy)
    except Exception as exc:  # noqa: BLE001 - the pack says why, it does not stop
        return [], f"{type(exc).__name__}: {exc}"
    try:
        got = dict(root.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                                "(SELECT unnest(?))", [sorted(want)]).fetchall())
    finally:
        root.close()
    out = []
    for name, expected in want.items():
        value = got.get(name)
        if name == "memory_limit":  # reported in DuckDB's units: set is what counts
            ok, expected = bool(value) and value not in ("", "-1"), f"{policy.memory_limit_mb} MB"
        else:
            ok = str(value).lower() == expected
        out.append(Setting(name=name, value=None if value is None else str(value),
                           expected=expected or "(empty)", ok=ok))
    return out, None


def collect_evidence(env: Environment, now: dt.datetime | None = None) -> Evidence:
    """The evidence pack of the environment's project and pinned snapshot."""
    policy = env.policy()
    policy_path = Path(env.project.guard_policy_path)
    if not policy_path.exists():
        policy_path = DEFAULT_POLICY_PATH
    settings, error = read_settings(env.serving, policy)
    guard = load_guardrails(build_root(env) / GUARDRAILS_REPORT)
    checksum_now = file_checksum(env.serving) if env.serving.exists() else None
    notes = []
    if guard is None:
        notes.append("the hostile suite has not run in this build directory: run `sqleval build` "
                     "or `sqleval guardrails run --json <build>/reports/guardrails.json`")
    else:
        if guard.snapshot_file and guard.snapshot_file != env.serving.name:
            notes.append(f"the hostile suite ran on {guard.snapshot_file}, not on the pinned "
                         f"{env.serving.name}: run it again")
        elif checksum_now and checksum_now != guard.checksum_after:
            notes.append("the serving file's checksum now differs from the one after the suite "
                         "(the file was rebuilt since): run the suite again for current evidence")
        ran = dt.datetime.fromisoformat(guard.ran_at) if guard.ran_at else None
        if ran is not None and ran.tzinfo is None:  # written without a zone by earlier versions: UTC
            ran = ran.replace(tzinfo=dt.UTC)
        edited = dt.datetime.fromtimestamp(policy_path.stat().st_mtime, dt.UTC)
        if ran is not None and edited > ran:
            notes.append(f"the guard policy file was changed after the suite ran ({policy_path.name}"
                         f" modified {edited.isoformat(timespec='seconds')}): run the suite again")
    limits = {k: getattr(policy, k) for k in (
        "row_cap", "max_result_bytes", "max_cell_bytes", "max_sql_bytes", "max_series_rows",
        "statement_timeout_s", "kill_grace_s", "memory_limit_mb", "threads", "address_space_mb")}
    sandbox = {k: getattr(policy, k) for k in (
        "workers", "start_method", "max_queries_per_worker", "recycle_rss_mb", "recycle_vm_mb")}
    return Evidence(
        generated_at=(now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        versions=_versions(), project=env.project.name, snapshot_id=env.snapshot_id,
        as_of=env.as_of.isoformat(), serving_file=env.serving.name, checksum_now=checksum_now,
        policy_version=policy.version, policy_file=policy_path.name,
        tables=sorted(policy.tables), schemas=sorted(policy.schemas),
        functions=sorted(policy.allowed_functions),
        table_functions=sorted(ALLOWED_TABLE_FUNCTIONS),
        denied_names=sorted(policy.denied_function_names),
        denied_patterns=list(policy.denied_function_patterns), limits=limits, sandbox=sandbox,
        settings=settings, settings_error=error, guardrails=guard, notes=notes)
