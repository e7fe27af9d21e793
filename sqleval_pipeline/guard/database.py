"""Layer 2, the database: the serving snapshot opened read-only, locked down, one connection per query.

:func:`open_guarded_database` opens the serving file read-only and applies, in this order
(measured: ``temp_directory`` cannot be changed once external access is off; the lock comes
last), as *global* settings so that every connection derived from it inherits them:

1. ``temp_directory=''`` at connect time (no spilling: the guard never writes to disk)
2. ``enable_external_access=false`` (no files, URLs, COPY, ATTACH, extension installs)
3. ``autoinstall_known_extensions=false``, ``autoload_known_extensions=false``,
   ``allow_community_extensions=false``
4. ``python_enable_replacements=false`` (no scans of the harness's Python variables)
5. ``allow_persistent_secrets=false``
6. ``memory_limit``, ``threads``, ``max_execution_time`` from the policy
7. ``TimeZone='UTC'`` and ``Calendar='gregorian'``: no session state reaches an answer
   (``strftime(TIMESTAMPTZ ..., '%Z')`` and every TIMESTAMPTZ rendering would otherwise
   show the machine's time zone; with the zone pinned they are the same on every machine)
8. ``lock_configuration=true``

The settings are read back and compared (:func:`verify_settings`); any difference fails
closed with :class:`DatabaseSetupError`. That *root* connection never runs untrusted SQL:
each query gets a fresh connection (:func:`fresh_connection`, DuckDB's ``cursor()``: its own
client context, so temporary tables, views, macros, variables, prepared statements and
``search_path`` do not survive the query), which is closed afterwards.

>>> from sqleval_pipeline.guard.policy import load_policy  # doctest: +SKIP
>>> root = open_guarded_database(path, load_policy())       # doctest: +SKIP
>>> with fresh_connection(root) as con:                     # doctest: +SKIP
...     con.execute("SELECT count(*) FROM fct_orders").fetchall()
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from sqleval_pipeline.guard.policy import GuardPolicy
from sqleval_pipeline.errors import SqlevalError

LAYER = "database"


class DatabaseSetupError(SqlevalError, RuntimeError):
    """The serving snapshot could not be opened with every restriction in place."""


def settings_for(policy: GuardPolicy, timeout_ms: int | None = None) -> list[tuple[str, str, str]]:
    """(name, SQL value, expected value as read back) in the order they must be applied."""
    tms = str(timeout_ms if timeout_ms is not None else policy.timeout_ms)
    return [
        ("enable_external_access", "false", "false"),
        ("autoinstall_known_extensions", "false", "false"),
        ("autoload_known_extensions", "false", "false"),
        ("allow_community_extensions", "false", "false"),
        ("python_enable_replacements", "false", "false"),
        ("allow_persistent_secrets", "false", "false"),
        ("memory_limit", f"'{policy.memory_limit_mb}MB'", ""),
        ("threads", str(policy.threads), str(policy.threads)),
        ("max_execution_time", tms, tms),
        ("TimeZone", "'UTC'", "utc"),
        ("Calendar", "'gregorian'", "gregorian"),
        ("lock_configuration", "true", "true"),
    ]


def open_guarded_database(path: Path | str, policy: GuardPolicy, *,
                          timeout_ms: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open the serving file read-only with every restriction applied and locked (see module doc)."""
    path = Path(path)
    if not path.exists():
        raise DatabaseSetupError(f"serving file {path} is missing; run `sqleval snapshot build`")
    try:
        root = duckdb.connect(str(path), read_only=True, config={"temp_directory": ""})
    except duckdb.Error as exc:
        raise DatabaseSetupError(f"cannot open {path} read-only: {exc}") from exc
    try:
        for name, value, _ in settings_for(policy, timeout_ms):
            if name == "lock_configuration":
                close_file_access(root, path)  # before the lock: it cannot be set afterwards
            root.execute(f"SET GLOBAL {name} = {value}")
        problems = verify_settings(root, policy, timeout_ms)
    except Exception as exc:
        root.close()
        raise DatabaseSetupError(f"cannot lock down {path}: {exc}") from exc
    if problems:
        root.close()
        raise DatabaseSetupError("the guarded connection is not locked down: " + "; ".join(problems))
    return root


def close_file_access(root: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Let untrusted SQL read no file at all, the serving file included.

    Measured (DuckDB 2.0): turning ``enable_external_access`` off puts the open database file
    (and its ``.wal`` names) on ``allowed_paths``, which can then no longer be changed, so
    ``read_blob('<serving file>')`` would return the whole snapshot. Disabling the local file
    system afterwards refuses every file function with a permission error, while the open
    database keeps reading its own blocks. ``duckdb_settings()`` does not report
    ``disabled_filesystems``, so the effect is checked by trying to read the serving file."""
    root.execute("SET GLOBAL disabled_filesystems = 'LocalFileSystem'")
    probe = str(path.resolve()).replace("'", "''")
    try:
        root.execute(f"SELECT count(*) FROM read_blob('{probe}')").fetchall()
    except duckdb.PermissionException:
        return
    except duckdb.Error as exc:
        raise DatabaseSetupError(f"the serving file's readability could not be checked: {exc}") from exc
    raise DatabaseSetupError("untrusted SQL could read the serving file (read_blob)")


def verify_settings(con: duckdb.DuckDBPyConnection, policy: GuardPolicy,
                    timeout_ms: int | None = None) -> list[str]:
    """Differences between the settings a connection reports and those the policy demands."""
    names = [n for n, _, _ in settings_for(policy, timeout_ms)] + ["access_mode", "temp_directory"]
    got = dict(con.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))", [names]
    ).fetchall())
    want = {n: v for n, _, v in settings_for(policy, timeout_ms)}
    want["access_mode"] = "read_only"
    want["temp_directory"] = ""
    problems = []
    for name, value in want.items():
        if name == "memory_limit":
            if not got.get(name) or got[name] in ("", "-1"):
                problems.append("memory_limit is not set")
            continue
        if str(got.get(name)).lower() != value:
            problems.append(f"{name} is {got.get(name)!r}, expected {value!r}")
    return problems


@contextmanager
def fresh_connection(root: duckdb.DuckDBPyConnection,
                     search_path: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A new connection (own client context) on the locked database, closed afterwards.
    ``search_path`` is the serving schema when it is not ``main`` (a session setting, allowed
    after the lock), so unqualified table names resolve to the served tables."""
    con = root.cursor()
    try:
        if search_path and search_path != "main":
            con.execute(f"SET search_path = '{search_path}'")
        yield con
    finally:
        try:
            con.close()
        except Exception:  # noqa: BLE001 - closing must never mask the query's outcome
            pass


_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def classify_error(class_name: str, message: str) -> tuple[str, str | None, str]:
    """Map a DuckDB (or worker) exception to ``(status, layer, reason)``.

    ``status`` is ``timeout``, ``refused`` (a guard restriction stopped the query: permission,
    read-only, locked configuration, memory) or ``error`` (the SQL itself is wrong: the
    system's fault; ``layer`` is then None and ``reason`` the error code).

    >>> classify_error("InterruptException", "INTERRUPT Error: Query exceeded maximum execution time 2000ms")
    ('timeout', 'database', 'statement_timeout')
    >>> classify_error("PermissionException", 'Permission Error: Cannot access file "/etc/passwd"')
    ('refused', 'database', 'permission_denied')
    >>> classify_error("CatalogException", "Catalog Error: Table with name salaries does not exist!")
    ('error', None, 'catalog_error')
    """
    m = message.lower()
    if class_name == "InterruptException" or "interrupt" in m and "execution time" in m:
        return "timeout", LAYER, "statement_timeout"
    if class_name == "MemoryError" or "bad_alloc" in m or "bad allocation" in m:
        return "refused", "sandbox", "address_space_limit"
    if class_name == "OutOfMemoryException" or "out of memory" in m:
        return "refused", LAYER, "memory_limit"
    if class_name == "PermissionException" or "permission error" in m:
        return "refused", LAYER, "permission_denied"
    if "configuration has been locked" in m:
        return "refused", LAYER, "configuration_locked"
    if "read-only" in m or "read only" in m:
        return "refused", LAYER, "read_only"
    code = _SNAKE.sub("_", class_name.replace("Exception", "Error")).lower()
    return "error", None, code or "sql_error"
