"""Guarded execution: the one entry point that runs untrusted SQL through every layer.

Order (docs/guardrails.md): **statement filter** → **pinned clock** (the pinned text is filtered again
and must hold no clock call) → **database** (read-only, locked, fresh connection) inside the
**process sandbox** (address-space limit, wall-clock kill) → **result cap** (at most
``row_cap`` rows, truncation flagged, oversized results refused). The first layer that
stops a query is named in the result with a reason code and a sentence; nothing raises for
reasons that come from the SQL.

>>> with GuardedExecutor(snapshot_path, as_of=date(2025, 12, 15)) as guard:   # doctest: +SKIP
...     r = guard.execute("SELECT count(*) AS n FROM fct_orders")
...     r.status, r.result.rows
('ok', [[60000]])
>>> guard.execute("DROP TABLE fct_orders").describe()                         # doctest: +SKIP
'refused by filter (ddl_statement): DROP changes the schema; only queries (SELECT) are allowed.'

Each execution is logged as a structured record (:meth:`GuardResult.to_record`) on the
``sqleval_pipeline.guard`` logger (the JSON-able dict is in ``record.guard``) and, when
``log_path`` is given, appended to that JSON Lines file. :meth:`GuardResult.to_execution`
converts to the pipeline's :class:`~sqleval_pipeline.pipeline.records.Execution` record.
"""

from __future__ import annotations

import atexit
import datetime as dt
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqleval_pipeline.guard.budget import BUDGET_REASON, Budget
from sqleval_pipeline.guard.cap import inject_limit
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.guard.database import classify_error
from sqleval_pipeline.guard.messages import scrub_message, scrub_paths  # noqa: F401 (scrub_paths re-exported)
from sqleval_pipeline.guard.policy import GuardPolicy, load_policy
from sqleval_pipeline.guard.sandbox import WorkerPool, WorkerReply
from sqleval_pipeline.guard.statement_filter import StatementFilter
from sqleval_pipeline.results import ResultSet, encode_value
from sqleval_pipeline.textfiles import ENCODING_ERRORS, encodable
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.pipeline.records import Execution
from sqleval_pipeline.snapshot import list_serving_objects

log = logging.getLogger("sqleval_pipeline.guard")

Status = Literal["ok", "refused", "timeout", "error"]
NON_PROMPT_LAYERS = ("filter", "database", "sandbox", "cap")


class GuardSetupError(SqlevalError, RuntimeError):
    """The guard could not be set up (missing snapshot, unexpected objects in it ...)."""


@dataclass
class GuardResult:
    """The typed outcome of one guarded execution.

    - ``status="ok"``: ``result`` holds at most ``row_cap`` rows; ``truncated`` says more
      existed (``layer="cap"``, ``reason="row_cap"`` then).
    - ``status="refused"``: ``layer`` (filter, database, sandbox, cap) stopped it; ``reason``
      is a code, ``message`` a sentence.
    - ``status="timeout"``: the statement timeout (``layer="database"``) or the wall-clock kill
      (``layer="sandbox"``) fired.
    - ``status="error"``: DuckDB rejected the SQL (``error_source="sql"``, ``reason`` is the
      error code, e.g. ``binder_error``) or the harness failed (``error_source="harness"``).
    """

    status: Status
    sql: str
    layer: str | None = None
    reason: str | None = None
    message: str | None = None
    result: ResultSet | None = None
    truncated: bool = False
    elapsed_ms: float = 0.0
    filter_ms: float = 0.0
    executed_sql: str | None = None
    tables: tuple[str, ...] = ()
    error_source: Literal["sql", "harness"] | None = None
    snapshot_id: str | None = None
    policy_version: str | None = None
    worker_pid: int | None = None
    timestamp: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat())

    def __post_init__(self) -> None:
        # whatever layer built it, a message going back to the system under test or into a
        # report never names a filesystem path, a size or usage figure or a setting's value;
        # and every text can be written, whatever code point it holds (a lone surrogate)
        self.message = scrub_message(self.message)
        for name in ("sql", "message", "executed_sql"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, encodable(value))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def stopped(self) -> bool:
        """True when no rows came back (refusal, timeout or error)."""
        return self.status != "ok"

    def describe(self) -> str:
        if self.status == "ok":
            n = len(self.result.rows) if self.result else 0
            return f"ok: {n} row(s){' (truncated)' if self.truncated else ''}"
        who = f"by {self.layer} " if self.layer else ""
        return f"{self.status} {who}({self.reason}): {self.message}"

    def to_record(self, *, include_rows: bool = False, **extra: Any) -> dict[str, Any]:
        """A JSON-able structured log record of this execution."""
        rec: dict[str, Any] = {
            "event": "guarded_execution",
            "timestamp": self.timestamp,
            "status": self.status,
            "layer": self.layer,
            "reason": self.reason,
            "message": self.message,
            "sql_sha256": hashlib.sha256(self.sql.encode("utf-8", "surrogatepass")).hexdigest(),
            "sql": self.sql if len(self.sql) <= 4000 else self.sql[:4000] + "…",
            "pinned": self.executed_sql is not None and self.executed_sql != self.sql,
            "tables": list(self.tables),
            "rows": len(self.result.rows) if self.result else None,
            "columns": list(self.result.columns) if self.result else None,
            "truncated": self.truncated,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "filter_ms": round(self.filter_ms, 3),
            "error_source": self.error_source,
            "snapshot_id": self.snapshot_id,
            "policy_version": self.policy_version,
            "worker_pid": self.worker_pid,
        }
        if include_rows and self.result is not None:
            rec["result"] = self.result.to_json()
        rec.update(extra)
        return rec

    def to_execution(self, config_version: str, case_id: str, run_index: int):
        """The pipeline record (:class:`sqleval_pipeline.pipeline.records.Execution`) of this execution."""
        kw: dict[str, Any] = {
            "config_version": config_version, "case_id": case_id, "run_index": run_index,
            "status": self.status, "result": self.result, "truncated": self.truncated,
            "elapsed_ms": self.elapsed_ms, "layer": self.layer, "reason": self.reason,
            "message": self.message, "policy_version": self.policy_version,
        }
        if self.status == "error":
            kw.update(error_source=self.error_source or "harness", error_code=self.reason,
                      error_message=self.message)
        return Execution(**kw)


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


class GuardedExecutor:
    """Runs untrusted SQL on one serving snapshot through every guard layer.

    ``as_of`` pins the clock (the snapshot manifest's as-of date). ``policy`` defaults to the
    bundled ``evals/guard_policy.yaml`` over the tables the serving file holds (a project
    passes its own, :func:`~sqleval_pipeline.guard.policy.project_policy`);
    ``policy_overrides`` applies a configuration's overrides.
    ``log_path`` appends every execution record to a JSON Lines file. Thread-safe; use as a
    context manager or call :meth:`close`.
    """

    def __init__(self, snapshot_path: Path | str, *, as_of: dt.date,
                 policy: GuardPolicy | None = None, policy_overrides: dict[str, Any] | None = None,
                 log_path: Path | str | None = None, pool_size: int | None = None,
                 verify_snapshot_objects: bool = True):
        self.snapshot_path = Path(snapshot_path)
        if not self.snapshot_path.exists():
            raise GuardSetupError(f"serving file {self.snapshot_path} is missing; run `sqleval snapshot build`")
        if policy is None:
            # no project policy: the bundled one over the tables of the default serving schema
            # (objects anywhere else make the setup check below refuse the file)
            objects = list_serving_objects(self.snapshot_path)
            policy = load_policy(served=[o[2] for o in objects if o[1] == "main"], schemas=["main"])
        self.policy = policy.with_overrides(policy_overrides)
        self._policy_version = self.policy.version  # immutable policy: hash it once
        self.as_of = as_of
        self.snapshot_id = self.snapshot_path.stem
        self.log_path = Path(log_path) if log_path else None
        self._log_lock = threading.Lock()
        self._log_fh = None
        if verify_snapshot_objects:
            self._verify_objects()
        self.filter = StatementFilter(self.policy, database_names={self.snapshot_id})
        self.pool = WorkerPool(self.snapshot_path, self.policy, size=pool_size)
        self._closed = False

    def _verify_objects(self) -> None:
        objects = list_serving_objects(self.snapshot_path)
        stray = [".".join(o) for o in objects if o[1] not in self.policy.schemas]
        if stray:
            raise GuardSetupError(f"the serving file holds objects outside {sorted(self.policy.schemas)}: "
                                  f"{stray}; it is not a serving snapshot")
        unlisted = sorted({o[2].lower() for o in objects} - self.policy.tables)
        if unlisted:
            log.warning("serving snapshot tables not on the guard allowlist (they will be refused): %s",
                        unlisted)

    # ------------------------------------------------------------------ execution

    def check(self, sql: str):
        """Run only the statement filter, sqlglot's view (no execution; see :meth:`decide`)."""
        return self.filter.check(sql)

    def decide(self, sql: str) -> GuardResult:
        """Every check that comes before execution, nothing executed: the statement filter,
        the pinned clock (and the filter again on the rewritten text), then DuckDB's own view
        in a worker (parse tree and bound plan against the allowlists). Status ``ok`` with no
        result when the statement would run; else the refusal :meth:`execute` would give."""
        return self._run(sql, inspect_only=True)

    def execute(self, sql: str, *, timeout_s: float | None = None, limit: int | None = None,
                log_extra: dict[str, Any] | None = None, kill_grace_s: float | None = None) -> GuardResult:
        """Run ``sql`` through every layer and return a :class:`GuardResult` (never raises for SQL).

        ``timeout_s`` lowers the statement timeout for this call, ``kill_grace_s`` the time the
        worker then has to answer before it is killed; ``limit`` (serving paths) injects
        ``LIMIT`` so DuckDB itself stops after that many rows (the cap still applies).
        """
        return self._run(sql, timeout_s=timeout_s, limit=limit, log_extra=log_extra, kill_grace_s=kill_grace_s)

    def statement_timeout(self, timeout_s: float | None = None) -> float:
        """The statement timeout a call runs under: the policy's, or ``timeout_s`` when lower."""
        limit = self.policy.statement_timeout_s
        return min(timeout_s, limit) if timeout_s else limit

    def _run(self, sql: str, *, timeout_s: float | None = None, limit: int | None = None,
             log_extra: dict[str, Any] | None = None, inspect_only: bool = False,
             kill_grace_s: float | None = None) -> GuardResult:
        t0 = time.perf_counter()
        base = {"sql": sql if isinstance(sql, str) else repr(sql), "snapshot_id": self.snapshot_id,
                "policy_version": self._policy_version}

        def done(res: GuardResult) -> GuardResult:
            res.elapsed_ms = (time.perf_counter() - t0) * 1000
            if not inspect_only:
                self._log(res, log_extra)
            return res

        timeout = self.statement_timeout(timeout_s)
        # one time budget for all the parent does before a worker takes over (guard/budget.py):
        # the filter, the pinned clock, the filter again on the pinned text
        budget = Budget(min(self.filter.budget_s, timeout))
        verdict = self.filter.check(sql) if budget.limit_s >= self.filter.budget_s else \
            self.filter.check(sql, budget_s=budget.limit_s)
        if not verdict.allowed:
            return done(GuardResult("refused", layer="filter", reason=verdict.reason, message=verdict.message,
                                    filter_ms=verdict.elapsed_ms, **base))
        filter_ms = verdict.elapsed_ms
        try:
            # a text with no token spelled like a clock call is left as it is by pin_clock
            executed = pin_clock(sql, self.as_of) if verdict.clock_tokens else sql
            if limit is not None:
                executed = inject_limit(executed, limit)
        except Exception as exc:  # noqa: BLE001 - fail closed
            return done(GuardResult("refused", layer="filter", reason="rewrite_failed",
                                    message=f"The statement could not be rewritten safely ({exc}).",
                                    filter_ms=filter_ms, **base))
        if budget.expired:
            return done(GuardResult("refused", layer="filter", reason=BUDGET_REASON,
                                    message=budget.exceeded("pin").message, filter_ms=filter_ms,
                                    executed_sql=executed, **base))
        residual = verdict.clock_calls  # clock calls left in the text that runs
        if executed != sql:  # the text executed is always a text the filter accepted
            again = self.filter.check(executed, budget_s=budget.remaining())
            filter_ms += again.elapsed_ms
            if not again.allowed:
                return done(GuardResult("refused", layer="filter", reason=again.reason,
                                        message=f"After pinning the clock: {again.message}",
                                        filter_ms=filter_ms, executed_sql=executed, **base))
            residual = again.clock_calls
        if residual:
            return done(GuardResult("refused", layer="filter", reason="unpinned_clock",
                                    message=f"The clock call {residual[0]}() could not be pinned to the "
                                            "snapshot's as-of date.", filter_ms=filter_ms,
                                    executed_sql=executed, **base))
        try:
            reply = self.pool.run(executed, timeout_s=timeout, inspect_only=inspect_only, kill_grace_s=kill_grace_s)
        except Exception as exc:  # noqa: BLE001 - a harness fault, not the SQL's
            return done(GuardResult("error", error_source="harness", reason="sandbox_unavailable",
                                    message=f"{type(exc).__name__}: {exc}", filter_ms=filter_ms,
                                    executed_sql=executed, tables=verdict.tables, **base))
        # DuckDB's own view (guard/duckdb_view.py, checked in the worker before execution) is
        # part of the statement filter: its refusals are the filter's
        if reply.guard_refusal in ("duckdb_not_single_select", "duckdb_table_not_allowed",
                                   "duckdb_function_not_allowed", "views_disagree"):
            return done(GuardResult("refused", layer="filter", reason=reply.guard_refusal,
                                    message=reply.error_message, filter_ms=filter_ms, executed_sql=executed,
                                    tables=verdict.tables, worker_pid=reply.worker_pid, **base))
        if reply.ok:
            # every table DuckDB scanned must be one sqlglot saw (else the two parsers read
            # different queries); a table sqlglot saw that DuckDB does not scan (an unused CTE)
            # is harmless and allowed
            unseen = sorted(set(reply.duckdb_tables or ()) - set(verdict.tables)) \
                if reply.duckdb_tables is not None else ["<no view>"]
            if unseen:
                return done(GuardResult(
                    "refused", layer="filter", reason="views_disagree",
                    message=f"DuckDB reads {unseen} but the statement filter saw {list(verdict.tables)}: "
                            "the two parsers disagree about this text.", filter_ms=filter_ms,
                    executed_sql=executed, tables=verdict.tables, worker_pid=reply.worker_pid, **base))
            if inspect_only:
                return done(GuardResult("ok", filter_ms=filter_ms, executed_sql=executed, tables=verdict.tables,
                                        worker_pid=reply.worker_pid, **base))
        return done(self._from_reply(reply, base, filter_ms, executed, verdict.tables))

    def _from_reply(self, reply: WorkerReply, base: dict, filter_ms: float, executed: str,
                    tables: tuple[str, ...]) -> GuardResult:
        common = {"filter_ms": filter_ms, "executed_sql": executed, "tables": tables,
                  "worker_pid": reply.worker_pid, **base}
        if reply.ok:
            rs = ResultSet(columns=reply.columns, types=reply.types,
                           rows=[[_value(v) for v in row] for row in reply.rows])
            if reply.truncated:
                return GuardResult("ok", layer="cap", reason="row_cap", result=rs, truncated=True,
                                   message="More rows than the row cap: the result was truncated.",
                                   **common)
            return GuardResult("ok", result=rs, **common)
        error_message = scrub_message(reply.error_message)
        if reply.sandbox_reason == "wall_clock_kill":
            return GuardResult("timeout", layer="sandbox", reason="wall_clock_kill",
                               message="No answer within the wall-clock limit: the worker was killed and replaced.",
                               **common)
        if reply.sandbox_reason == "worker_crashed":
            return GuardResult("refused", layer="sandbox", reason="worker_crashed", message=error_message,
                               **common)
        if reply.guard_refusal:
            return GuardResult("refused", layer="database", reason=reply.guard_refusal,
                               message=error_message, **common)
        if reply.sandbox_reason == "result_too_large":
            return GuardResult("refused", layer="cap", reason="result_too_large",
                               message="The result is larger than the result cap once encoded.", **common)
        if reply.sandbox_reason == "cell_too_large":
            return GuardResult("refused", layer="cap", reason="cell_too_large",
                               message="A single value, column name or type of the result is larger "
                                       "than the cell cap once encoded.", **common)
        status, layer, reason = classify_error(reply.error_class or "", reply.error_message or "")
        msg = error_message.strip().splitlines()[0][:500] if error_message else None
        if status == "error":
            return GuardResult("error", reason=reason, message=msg, error_source="sql", **common)
        return GuardResult(status, layer=layer, reason=reason, message=msg, **common)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ logging / lifecycle

    def _log(self, res: GuardResult, extra: dict[str, Any] | None) -> None:
        if self.log_path is None and not log.isEnabledFor(logging.INFO):
            return  # nobody listens: do not pay for the record
        rec = res.to_record(**(extra or {}))
        log.info("guard %s %s%s", res.status, res.layer or "", f" {res.reason}" if res.reason else "",
                 extra={"guard": rec})
        self._append(rec)

    def log_reuse(self, res: GuardResult, extra: dict[str, Any]) -> None:
        """Record that an attempt got the execution ``res`` made for the same SQL text earlier
        (``extra`` names the attempt and, as ``same_sql_as``, the one it was made for)."""
        if self.log_path is None and not log.isEnabledFor(logging.INFO):
            return
        rec = {**res.to_record(**extra), "event": "guarded_execution_reused", "elapsed_ms": 0.0}
        log.info("guard reused %s", res.status, extra={"guard": rec})
        self._append(rec)

    def _append(self, rec: dict[str, Any]) -> None:
        if self.log_path is None:
            return
        # ASCII JSON: no raw line separator (U+2028, NEL) or lone surrogate in the log
        line = json.dumps(rec, default=encode_value)
        with self._log_lock:
            if self._log_fh is None:  # opened once, one write per record (a crash keeps them)
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log_fh = self.log_path.open("a", encoding="utf-8", errors=ENCODING_ERRORS)
            self._log_fh.write(line + "\n")
            self._log_fh.flush()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.close()
            with self._log_lock:
                if self._log_fh is not None:
                    self._log_fh.close()
                    self._log_fh = None

    def __enter__(self) -> GuardedExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------- shared executors

_shared: dict[tuple, GuardedExecutor] = {}
_shared_lock = threading.Lock()


def execute_guarded(sql: str, snapshot_path: Path | str, *, as_of: dt.date,
                    policy_overrides: dict[str, Any] | None = None,
                    timeout_s: float | None = None, limit: int | None = None) -> GuardResult:
    """Run ``sql`` through the guard with a shared, warm executor for this snapshot and policy.

    >>> execute_guarded("SELECT 1; DROP TABLE x", path, as_of=date(2025, 12, 15)).reason  # doctest: +SKIP
    'multiple_statements'
    """
    key = (str(Path(snapshot_path).resolve()), as_of, json.dumps(policy_overrides or {}, sort_keys=True))
    with _shared_lock:
        ex = _shared.get(key)
        if ex is None or ex._closed:
            ex = _shared[key] = GuardedExecutor(snapshot_path, as_of=as_of, policy_overrides=policy_overrides)
    return ex.execute(sql, timeout_s=timeout_s, limit=limit)


@atexit.register
def close_shared_executors() -> None:
    """Stop the workers of every shared executor (also run at interpreter exit)."""
    with _shared_lock:
        for ex in _shared.values():
            ex.close()
        _shared.clear()
