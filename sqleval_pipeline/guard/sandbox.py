"""Layer 3, the process sandbox: queries run in a warm pool of resource-limited worker processes.

Some single expressions (``repeat('x', 2e9)``, ``range(3e8)``) ignore DuckDB's memory limit,
``interrupt()`` and ``max_execution_time``. So untrusted SQL never runs in the calling
process: it runs in a worker that

* has an address-space limit (``RLIMIT_AS``), no core dumps and a zero file-size limit
  (``RLIMIT_FSIZE=0``: it cannot create or grow any file, whatever DuckDB is talked into);
* runs in an empty private working directory with stdin closed;
* opens the serving snapshot once through :mod:`sqleval_pipeline.guard.database` (read-only,
  locked) and gives each query a fresh connection, interrupted by a timer at the timeout;
* is killed by the parent (SIGKILL) when no answer arrives within the timeout plus a grace
  period, and replaced; a worker that dies (crash, abort, OOM kill) is replaced as well.
* is recycled (replaced before its next query) when its reply was a memory / address-space
  refusal or could not be sent, when its resident or virtual size (``/proc/<pid>/status``
  VmRSS / VmSize) is still above ``recycle_rss_mb`` / ``recycle_vm_mb`` after a query (such a
  worker fails later, legitimate queries), or after ``max_queries_per_worker`` queries;
* measures the result while fetching it (:func:`~sqleval_pipeline.guard.cap.fetch_capped`:
  rows, encoded bytes, bytes per value) and sends one pickled reply, which the parent reads
  with a hard length limit (:func:`wire_limit`): it never receives more than that.

The calling process only parses SQL (bounded by the filter's size cap, its structural bounds
and its time budget: guard/bounds.py, guard/budget.py) and reads replies, so it survives
whatever the SQL does. Workers are started with the ``forkserver`` context
(measured: a replacement is ready in ~0.1 s, against ~0.6 s for ``spawn``, because the fork
server has DuckDB imported already); ``spawn`` is available through the policy.

>>> pool = WorkerPool(snapshot_path, policy)            # doctest: +SKIP
>>> reply = pool.run("SELECT count(*) FROM fct_orders")  # doctest: +SKIP
>>> reply.ok, reply.rows                                 # doctest: +SKIP
(True, [(60000,)])
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
import functools
from multiprocessing.reduction import ForkingPickler
import resource

from sqleval_pipeline.guard.cap import CapExceeded, fetch_capped, header_size, nested_columns, precheck_nested
from sqleval_pipeline.guard.lru import LRU, text_key
from sqleval_pipeline.guard.policy import GuardPolicy
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.guard import duckdb_view
from sqleval_pipeline.guard.database import fresh_connection, open_guarded_database

LAYER = "sandbox"
log = logging.getLogger("sqleval_pipeline.guard")
_READY_TIMEOUT_S = 60.0


_MEMORY_MARKERS = ("out of memory", "bad_alloc", "bad allocation", "cannot allocate memory",
                   "failed to allocate", "memoryerror", "reply could not be sent")


def memory_failure(error_class: str | None, message: str | None) -> bool:
    """True when a reply says the worker ran out of memory or address space (or could not send
    its reply): such a worker may stay near its limits, so it is recycled before its next query."""
    if error_class in ("OutOfMemoryException", "MemoryError"):
        return True
    m = (message or "").lower()
    return any(k in m for k in _MEMORY_MARKERS)


def wire_limit(policy: GuardPolicy) -> int:
    """Most bytes the parent reads for one reply: the encoded-result cap plus room for the
    pickle's own framing (dates, decimals ... pickle larger than they encode), whatever the
    worker sends; a longer reply is refused (``result_too_large``) and the worker replaced."""
    return 2 * policy.max_result_bytes + (1 << 20)


def process_memory(pid: int | None) -> tuple[int | None, int | None]:
    """(VmRSS, VmSize) of a process in bytes, from ``/proc/<pid>/status`` (None when unknown)."""
    rss = vm = None
    if pid is None:
        return rss, vm
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) << 10
                elif line.startswith("VmSize:"):
                    vm = int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return rss, vm


class SandboxError(SqlevalError, RuntimeError):
    """The worker pool cannot be started (e.g. the serving file cannot be opened)."""


@dataclass
class WorkerReply:
    """What one worker returned (or what the parent concluded when it did not)."""

    ok: bool
    columns: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    error_class: str | None = None
    error_message: str | None = None
    #: "wall_clock_kill" | "worker_crashed" (set by the parent) | "result_too_large" |
    #: "cell_too_large" (the cap, measured in the worker while fetching)
    sandbox_reason: str | None = None
    #: set by the worker when DuckDB's own statement check refuses (layer database)
    guard_refusal: str | None = None
    worker_pid: int | None = None
    #: DuckDB's view (guard/duckdb_view.py): tables its bound plan scans, functions it names,
    #: and the cost of the view (parse_ms, plan_ms); None when the worker did not compute it
    duckdb_tables: list[str] | None = None
    duckdb_functions: list[str] | None = None
    view_ms: dict[str, float] | None = None


# --------------------------------------------------------------------------- worker side


def _limit_process(address_space_bytes: int, workdir: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C goes to the parent; it stops us
    os.chdir(workdir)
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    except OSError:
        pass


#: the worker's policy (set once by _worker_main; None in the parent)
_WORKER_POLICY: GuardPolicy | None = None


def _worker_main(conn: Connection, snapshot_path: str, policy_json: str, workdir: str) -> None:
    """Entry point of a worker process: limit itself, open the database, serve requests."""
    try:
        policy = GuardPolicy.model_validate_json(policy_json)
        global _WORKER_POLICY
        _WORKER_POLICY = policy  # the allowlists DuckDB's view is checked against (_run_one)
        _limit_process(policy.address_space_mb << 20, workdir)
        root = open_guarded_database(snapshot_path, policy)
        global _SERVED_COLUMNS
        _SERVED_COLUMNS = served_columns(root, policy)
        connect = fresh_connection
        if "main" not in policy.schemas:  # a serving schema of its own: resolve names there
            connect = functools.partial(fresh_connection, search_path=sorted(policy.schemas)[0])
    except BaseException as exc:  # noqa: BLE001 - report and exit
        try:
            conn.send({"fatal": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(3)
    conn.send({"ready": os.getpid()})
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if req.get("op") == "stop":
            root.close()
            os._exit(0)
        try:
            reply = _run_one(root, connect, req)
        except BaseException as exc:  # noqa: BLE001 - MemoryError while building the reply
            reply = {"ok": False, "error_class": type(exc).__name__, "error_message": str(exc)[:2000],
                     "recycle": True}
        try:
            payload = _dumps(reply)
            reply = None  # the rows are in the payload now: free them
            wire = req.get("max_wire_bytes")
            if wire is not None and len(payload) > wire:
                payload = _dumps({"ok": False, "sandbox_reason": "result_too_large",
                                  "error_message": f"the reply is larger than {wire} bytes"})
            conn.send_bytes(payload)
        except BaseException as exc:  # noqa: BLE001 - e.g. MemoryError while pickling
            payload = reply = None
            try:
                conn.send({"ok": False, "error_class": type(exc).__name__, "recycle": True,
                           "error_message": f"reply could not be sent: {str(exc)[:500]}"})
            except BaseException:  # noqa: BLE001
                os._exit(4)
        payload = None


def _dumps(obj: Any) -> memoryview:
    return ForkingPickler.dumps(obj)  # a memoryview of the pickle (no copy)


class _Watchdog:
    """One thread per worker that interrupts the running query when its deadline passes.

    Cheaper than a ``threading.Timer`` per query (a thread start each time). ``disarm``
    returns only when no interrupt for that query can still be issued.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: tuple[int, float, object] | None = None
        self._token = 0
        threading.Thread(target=self._loop, name="guard-watchdog", daemon=True).start()

    def arm(self, con, timeout_s: float) -> int:
        with self._cond:
            self._token += 1
            self._armed = (self._token, time.monotonic() + timeout_s, con)
            self._cond.notify()
            return self._token

    def disarm(self, token: int) -> None:
        with self._cond:
            if self._armed is not None and self._armed[0] == token:
                self._armed = None

    def _loop(self) -> None:
        with self._cond:
            while True:
                if self._armed is None:
                    self._cond.wait()
                    continue
                _token, deadline, con = self._armed
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._armed = None
                try:
                    con.interrupt()
                except Exception:  # noqa: BLE001 - the connection may already be closed
                    pass


_WATCHDOG: _Watchdog | None = None
#: the served tables' column names, read once by the worker (duckdb_view.decide)
_SERVED_COLUMNS: frozenset[str] | None = None


def served_columns(root, policy: GuardPolicy) -> frozenset[str]:
    """Lower-cased column names of the served tables (on the trusted root connection)."""
    tables = sorted(t.lower() for t in policy.tables)
    if not tables:
        return frozenset()
    rows = root.execute("SELECT DISTINCT lower(column_name) FROM duckdb_columns() "
                        "WHERE lower(table_name) IN (SELECT unnest(?)) AND lower(schema_name) IN (SELECT unnest(?))",
                        [tables, sorted(s.lower() for s in policy.schemas)]).fetchall()
    return frozenset(r[0] for r in rows)
#: DuckDB's view and verdict per SQL text, in this worker (see _run_one); keyed by the text's
#: SHA-256 and bounded in bytes as well as entries (guard/lru.py)
_VIEW_CACHE = LRU(4096, max_bytes=16 << 20)


def _watchdog() -> _Watchdog:
    global _WATCHDOG
    if _WATCHDOG is None:
        _WATCHDOG = _Watchdog()
    return _WATCHDOG


def _run_one(root, fresh_connection, req: dict) -> dict:
    t0 = time.perf_counter()
    with fresh_connection(root) as con:
        token = _watchdog().arm(con, req["timeout_s"])
        try:
            # DuckDB's own parser must agree with the filter: exactly one SELECT statement
            statements = con.extract_statements(req["sql"])
            # DuckDB's own view (parse tree, then the unoptimized bound plan) against the allowlists,
            # on this fresh connection, before anything runs (guard/duckdb_view.py)
            policy = _WORKER_POLICY
            if policy is None:  # fail closed: no allowlist to check against
                return {"ok": False, "guard_refusal": duckdb_view.NOT_SINGLE_SELECT,
                        "error_message": "the worker has no guard policy to check the statement with",
                        "elapsed_ms": (time.perf_counter() - t0) * 1000}
            # DuckDB's view is a pure function of the text for this worker's fixed snapshot,
            # policy and (fresh, identical) connection settings: a repeated text is decided once
            view_key = text_key(req["sql"])
            cached = _VIEW_CACHE.get(view_key)
            if cached is None:
                view, refusal = duckdb_view.inspect(con, req["sql"], statements, policy, policy.tables,
                                                    allowed_schemas=policy.schemas,
                                                    allowed_catalogs=policy.catalogs,
                                                    columns=_SERVED_COLUMNS)
                _VIEW_CACHE.put(view_key, (view, refusal))
            else:
                view, refusal = cached
            if refusal is not None:
                return duckdb_view.refusal_reply(refusal, view, (time.perf_counter() - t0) * 1000)
            view_ms = {"parse_ms": view.parse_ms, "plan_ms": view.plan_ms} if cached is None else \
                {"parse_ms": 0.0, "plan_ms": 0.0}
            if req.get("inspect_only"):  # `guardrails check`: DuckDB's verdict, nothing executed
                return {"ok": True, "columns": [], "types": [], "rows": [], "truncated": False,
                        "elapsed_ms": (time.perf_counter() - t0) * 1000,
                        "duckdb_tables": list(view.tables), "duckdb_functions": list(view.functions), **view_ms}
            cur = con.execute(statements[0])
            desc = cur.description or []
            # column names and type strings are returned too: measured before any row (cap.py)
            head = header_size(desc, max_bytes=req["max_result_bytes"], max_cell_bytes=req.get("max_cell_bytes"))
            if nested_columns(desc):
                # a nested value is measured by DuckDB before Python converts it (cap.py)
                precheck_nested(con, statements[0].query, desc, req["row_cap"],
                                max_bytes=req["max_result_bytes"], max_cell_bytes=req.get("max_cell_bytes"))
                cur = con.execute(statements[0])
                desc = cur.description or []
            # rows and bytes are counted while fetching: an oversized result stops the fetch
            rows, truncated = fetch_capped(cur, req["row_cap"], max_bytes=req["max_result_bytes"],
                                           max_cell_bytes=req.get("max_cell_bytes"), start=head)
        except CapExceeded as exc:
            return {"ok": False, "sandbox_reason": exc.reason, "error_message": exc.message,
                    "elapsed_ms": (time.perf_counter() - t0) * 1000}
        except BaseException as exc:  # noqa: BLE001 - every DuckDB error is a reply
            return {"ok": False, "error_class": type(exc).__name__, "error_message": str(exc)[:2000],
                    "recycle": memory_failure(type(exc).__name__, str(exc)),
                    "elapsed_ms": (time.perf_counter() - t0) * 1000}
        finally:
            _watchdog().disarm(token)
    return {"ok": True, "columns": [d[0] for d in desc], "types": [str(d[1]) for d in desc],
            "rows": rows, "truncated": truncated, "elapsed_ms": (time.perf_counter() - t0) * 1000,
            "duckdb_tables": list(view.tables), **view_ms}


# --------------------------------------------------------------------------- parent side


class _Worker:
    def __init__(self, ctx, snapshot_path: str, policy_json: str, workdir: str):
        parent, child = ctx.Pipe(duplex=True)
        self.conn = parent
        self.process = ctx.Process(target=_worker_main, args=(child, snapshot_path, policy_json, workdir),
                                   daemon=True, name="sqleval-guard-worker")
        self.process.start()
        child.close()
        self.ready = False
        self.queries = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def wait_ready(self, timeout: float = _READY_TIMEOUT_S) -> None:
        if self.ready:
            return
        if not self.conn.poll(timeout):
            self.kill()
            raise SandboxError(f"guard worker did not start within {timeout:.0f} s")
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise SandboxError(f"guard worker died while starting (exit code {self.process.exitcode})") from None
        if "fatal" in msg:
            self.kill()
            raise SandboxError(f"guard worker could not open the snapshot: {msg['fatal']}")
        self.ready = True

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        try:
            self.process.kill()
        except Exception:  # noqa: BLE001
            pass
        self.process.join(timeout=5)
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass

    def stop(self) -> None:
        try:
            self.conn.send({"op": "stop"})
            self.process.join(timeout=2)
        except Exception:  # noqa: BLE001
            pass
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


class WorkerPool:
    """A warm pool of sandboxed workers on one serving snapshot (thread-safe).

    ``replaced`` counts workers killed or found dead and replaced.
    """

    def __init__(self, snapshot_path: Path | str, policy: GuardPolicy, *, size: int | None = None,
                 start_method: str | None = None):
        self.snapshot_path = str(Path(snapshot_path).resolve())
        self.policy = policy
        self.size = size or policy.workers
        method = start_method or policy.start_method
        self._ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            self._ctx.set_forkserver_preload(["duckdb", "sqleval_pipeline.guard.sandbox",
                                              "sqleval_pipeline.guard.database",
                                              "sqleval_pipeline.guard.cap"])
        self.workdir = tempfile.mkdtemp(prefix="sqleval-guard-")
        self._policy_json = policy.model_dump_json()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._all: set[_Worker] = set()
        self._closed = False
        self.replaced = 0
        self.started = 0
        #: why workers were replaced: failed (killed, crashed, interrupted), max_queries,
        #: memory_failure, rss, vm, oversized_reply
        self.recycled: Counter[str] = Counter()
        try:  # whatever fails while starting (not only a SandboxError), nothing is left behind
            workers = [self._spawn() for _ in range(self.size)]
            for w in workers:
                w.wait_ready()
        except BaseException:
            self.close()
            raise
        for w in workers:
            self._idle.put(w)

    def _spawn(self) -> _Worker:
        w = _Worker(self._ctx, self.snapshot_path, self._policy_json, self.workdir)
        with self._lock:
            self._all.add(w)
            self.started += 1
        return w

    def _replace(self, w: _Worker, why: str = "failed") -> None:
        w.kill()
        with self._lock:
            self._all.discard(w)
            self.replaced += 1
            self.recycled[why] += 1
        if not self._closed:
            self._idle.put(self._spawn())  # readiness is awaited by its first user

    def _acquire(self) -> _Worker:
        if self._closed:
            raise SandboxError("the worker pool is closed")
        w = self._idle.get()
        try:
            if not w.alive():
                raise SandboxError("dead")
            w.wait_ready()
        except SandboxError:
            self._replace(w)
            w = self._idle.get()
            w.wait_ready()
        return w

    def _recycle_reason(self, w: _Worker, msg: dict) -> str | None:
        """Why ``w`` must not serve another query (None: it may): a memory / address-space
        refusal or an unsendable reply, resident or virtual size still above the policy's
        thresholds after the query, or its query quota used up."""
        policy = self.policy
        if msg.get("recycle") or (not msg.get("ok") and memory_failure(msg.get("error_class"),
                                                                        msg.get("error_message"))):
            return "memory_failure"
        rss, vm = process_memory(w.pid)
        if rss is not None and rss > policy.recycle_rss_mb << 20:
            return "rss"
        vm_limit = policy.recycle_vm_mb if policy.recycle_vm_mb is not None \
            else policy.address_space_mb * 2 // 3
        if vm is not None and vm > vm_limit << 20:
            return "vm"
        if w.queries >= policy.max_queries_per_worker:
            return "max_queries"
        return None

    def worker_pids(self) -> list[int]:
        with self._lock:
            return sorted(w.pid for w in self._all if w.pid is not None)

    def run(self, sql: str, *, timeout_s: float | None = None, row_cap: int | None = None,
            inspect_only: bool = False, kill_grace_s: float | None = None) -> WorkerReply:
        """Run one (already filtered) SQL text in a worker; never raises for SQL reasons.

        ``kill_grace_s`` lowers the policy's kill grace for this call: a worker that has not
        answered within the timeout plus the grace is killed.
        ``inspect_only``: compute and check DuckDB's view of the statement (parse tree and
        bound plan, guard/duckdb_view.py) without executing it; an allowed statement comes
        back ``ok`` with no rows."""
        policy = self.policy
        timeout = float(timeout_s if timeout_s is not None else policy.statement_timeout_s)
        grace = policy.kill_grace(kill_grace_s)
        wire = wire_limit(policy)
        req = {"sql": sql, "timeout_s": timeout, "row_cap": row_cap or policy.row_cap,
               "max_result_bytes": policy.max_result_bytes, "max_cell_bytes": policy.max_cell_bytes,
               "max_wire_bytes": wire, "inspect_only": inspect_only}
        w = self._acquire()
        t0 = time.perf_counter()
        recycle = False
        try:
            try:
                w.conn.send(req)
            except (OSError, EOFError, BrokenPipeError):
                self._replace(w)
                return WorkerReply(False, sandbox_reason="worker_crashed", worker_pid=w.pid,
                                   error_message="the worker was gone before the query was sent")
            if not w.conn.poll(timeout + grace):
                pid = w.pid
                self._replace(w)
                return WorkerReply(False, sandbox_reason="wall_clock_kill", worker_pid=pid,
                                   elapsed_ms=(time.perf_counter() - t0) * 1000,
                                   error_message=f"no answer within {timeout + grace:.1f} s: "
                                                 "the worker was killed")
            try:
                # never read more than the wire limit, whatever the worker sends
                msg = pickle.loads(w.conn.recv_bytes(maxlength=wire))
            except OSError as exc:
                if "bad message length" not in str(exc):
                    raise
                pid = w.pid
                self._replace(w, "oversized_reply")
                return WorkerReply(False, sandbox_reason="result_too_large", worker_pid=pid,
                                   elapsed_ms=(time.perf_counter() - t0) * 1000,
                                   error_message=f"the reply is larger than {wire} bytes")
            except (EOFError, OSError):
                pid = w.pid
                w.process.join(timeout=2)
                code = w.process.exitcode
                self._replace(w)
                how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0
                       else f"exit code {code}")
                return WorkerReply(False, sandbox_reason="worker_crashed", worker_pid=pid,
                                   elapsed_ms=(time.perf_counter() - t0) * 1000,
                                   error_message=f"the worker died ({how}); it was replaced")
            w.queries += 1
            recycle = self._recycle_reason(w, msg)
            return WorkerReply(
                ok=msg.get("ok", False), columns=msg.get("columns", []), types=msg.get("types", []),
                rows=msg.get("rows", []), truncated=msg.get("truncated", False),
                elapsed_ms=msg.get("elapsed_ms", (time.perf_counter() - t0) * 1000),
                error_class=msg.get("error_class"), error_message=msg.get("error_message"),
                sandbox_reason=msg.get("sandbox_reason"), guard_refusal=msg.get("guard_refusal"),
                worker_pid=w.pid, duckdb_tables=msg.get("duckdb_tables"),
                duckdb_functions=msg.get("duckdb_functions"),
                view_ms={k: msg[k] for k in ("parse_ms", "plan_ms") if k in msg} or None,
            )
        except BaseException:
            if w in self._all and w.alive():
                self._replace(w)  # interrupted mid-request (e.g. KeyboardInterrupt): never reuse
            raise
        finally:
            if w in self._all and not w.conn.closed:
                if recycle:
                    self._replace(w, recycle)
                else:
                    self._idle.put(w)

    def close(self) -> None:
        """Stop every worker and remove the private working directory."""
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for w in workers:
            w.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
