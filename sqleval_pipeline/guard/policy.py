"""The guard policy: one declarative file (``evals/guard_policy.yaml``), overridable per configuration.

The policy says which tables untrusted SQL may read (an allowlist: by default every table
the serving snapshot serves; the file's ``allowlist.tables`` can only narrow it), which
functions it may never call, and the resource limits of every layer (row cap, statement
timeout, memory, threads, address space, SQL size).

>>> p = load_policy(served=["fct_orders", "dim_customers"])
>>> p.row_cap, p.statement_timeout_s, sorted(p.tables)
(1000, 30.0, ['dim_customers', 'fct_orders'])
>>> p2 = p.with_overrides({"limits": {"row_cap": 50}, "allowlist": {"tables": ["fct_orders"]}})
>>> p2.row_cap, sorted(p2.tables)
(50, ['fct_orders'])

Overrides may *narrow* the allowlist (tables, schemas, catalogs) and *add* denied functions;
widening the allowlist or removing the baseline denylist raises :class:`PolicyError` — a
configuration cannot grant itself access the policy file does not.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from functools import cached_property
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sqleval_pipeline import paths

DEFAULT_POLICY_PATH = paths.EVALS_DIR / "guard_policy.yaml"

#: Functions refused whatever the policy file says (an override can only add to these).
BASELINE_DENIED_NAMES: frozenset[str] = frozenset({
    "query", "query_table", "glob", "getenv", "current_setting", "getvariable", "write_log",
    "json_execute_serialized_sql", "json_deserialize_sql", "checkpoint", "force_checkpoint",
    "which_secret", "enable_logging", "disable_logging", "truncate_duckdb_logs",
    "enable_profiling", "disable_profiling", "pandas_scan", "arrow_scan", "python_map_function",
    "sniff_csv", "summary",
})
BASELINE_DENIED_PATTERNS: tuple[str, ...] = (
    "duckdb_.*", "pragma_.*", "read_.*", "parquet_.*", "pg_.*", "json_execute.*",
)


class PolicyError(ValueError):
    """The policy file or an override is invalid; the message names the key."""


class GuardPolicy(BaseModel):
    """The resolved, immutable guard policy (see module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tables: frozenset[str]
    schemas: frozenset[str] = frozenset({"main"})
    catalogs: frozenset[str] = frozenset()
    max_sql_bytes: int = Field(20_000, gt=0, le=1_000_000)
    row_cap: int = Field(1000, gt=0, le=1_000_000)
    max_result_bytes: int = Field(32 << 20, gt=0)
    statement_timeout_s: float = Field(30.0, gt=0, le=3600)
    kill_grace_s: float = Field(2.0, ge=0.1, le=60)
    memory_limit_mb: int = Field(1024, ge=64)
    threads: int = Field(1, ge=1, le=64)
    address_space_mb: int = Field(3072, ge=512)
    workers: int = Field(2, ge=1, le=64)
    start_method: Literal["forkserver", "spawn"] = "forkserver"
    max_queries_per_worker: int = Field(2000, ge=1)
    # validate_default: a policy built in code gets the baseline denylist too
    denied_function_names: frozenset[str] = Field(frozenset(), validate_default=True)
    denied_function_patterns: tuple[str, ...] = Field((), validate_default=True)

    @field_validator("tables", "schemas", "catalogs", "denied_function_names", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError("expected a list of names, got a single string")
        return frozenset(str(x).lower() for x in v)

    @field_validator("denied_function_names", mode="after")
    @classmethod
    def _baseline_names(cls, v: frozenset[str]) -> frozenset[str]:
        return v | BASELINE_DENIED_NAMES

    @field_validator("denied_function_patterns", mode="after")
    @classmethod
    def _baseline_patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        out = tuple(dict.fromkeys((*BASELINE_DENIED_PATTERNS, *(p.lower() for p in v))))
        for p in out:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"denied function pattern {p!r} is not a regular expression: {exc}") from exc
        return out

    # ------------------------------------------------------------------ derived

    @cached_property
    def _denied_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.denied_function_patterns))

    def function_denied(self, name: str) -> bool:
        """True when a function name (any case) is on the denylist.

        >>> load_policy().function_denied("READ_CSV_AUTO"), load_policy().function_denied("sum")
        (True, False)
        """
        n = name.lower()
        return n in self.denied_function_names or self._denied_re.fullmatch(n) is not None

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.statement_timeout_s * 1000))

    @property
    def version(self) -> str:
        """A short content hash of the resolved policy (recorded with every execution)."""
        data = self.model_dump(mode="json")
        text = json.dumps(data, sort_keys=True, default=sorted)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def with_overrides(self, overrides: dict[str, Any] | None) -> GuardPolicy:
        """A new policy with a configuration's overrides applied (see module doc)."""
        if not overrides:
            return self
        return _from_document(_merge(_to_document(self), overrides), base=self)


# --------------------------------------------------------------------------- file format

_LIMIT_KEYS = ("max_sql_bytes", "row_cap", "max_result_bytes", "statement_timeout_s", "kill_grace_s",
               "memory_limit_mb", "threads", "address_space_mb")
_SANDBOX_KEYS = ("workers", "start_method", "max_queries_per_worker")
_TOP_KEYS = {"version", "allowlist", "limits", "sandbox", "denied_functions"}


def _to_document(p: GuardPolicy) -> dict[str, Any]:
    return {
        "version": 1,
        "allowlist": {"tables": sorted(p.tables), "schemas": sorted(p.schemas),
                      "catalogs": sorted(p.catalogs)},
        "limits": {k: getattr(p, k) for k in _LIMIT_KEYS},
        "sandbox": {k: getattr(p, k) for k in _SANDBOX_KEYS},
        "denied_functions": {"names": sorted(p.denied_function_names),
                             "patterns": list(p.denied_function_patterns)},
    }


def _merge(base: dict[str, Any], over: dict[str, Any], where: str = "") -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        key = f"{where}{k}"
        if k not in out and where == "":
            raise PolicyError(f"unknown guard policy key {key!r} (known: {sorted(_TOP_KEYS)})")
        if isinstance(v, dict):
            if not isinstance(out.get(k), dict):
                raise PolicyError(f"guard policy key {key!r} is not a mapping")
            out[k] = _merge(out[k], v, key + ".")
        elif k in ("names", "patterns") and where == "denied_functions.":
            out[k] = list(dict.fromkeys([*out.get(k, []), *v]))  # add-only
        else:
            out[k] = v
    return out


def _from_document(doc: dict[str, Any], base: GuardPolicy | None = None,
                   served: frozenset[str] | None = None, where: str = "the guard policy") -> GuardPolicy:
    if not isinstance(doc, dict):
        raise PolicyError("the guard policy must be a mapping")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise PolicyError(f"unknown guard policy key(s) {sorted(unknown)} (known: {sorted(_TOP_KEYS)})")
    allow = doc.get("allowlist") or {}
    limits = doc.get("limits") or {}
    sandbox = doc.get("sandbox") or {}
    denied = doc.get("denied_functions") or {}
    for section, data, keys in (("allowlist", allow, ("tables", "schemas", "catalogs")),
                                ("limits", limits, _LIMIT_KEYS), ("sandbox", sandbox, _SANDBOX_KEYS),
                                ("denied_functions", denied, ("names", "patterns"))):
        extra = set(data) - set(keys)
        if extra:
            raise PolicyError(f"unknown key(s) {sorted(extra)} in guard policy section {section!r}")
    tables = allow.get("tables")
    if served is not None:
        if tables is None:
            tables = sorted(served)
        else:
            extra = sorted({str(t).lower() for t in tables} - served)
            if extra:
                raise PolicyError(
                    f"{where}: allowlist.tables names {extra}, which the snapshot does not "
                    f"serve (served: {sorted(served)}); the policy can only narrow what is "
                    "served — remove them, or serve them through the project's serve.select")
    if not tables:
        raise PolicyError(f"{where}: allowlist.tables is empty: nothing could ever be read")
    try:
        policy = GuardPolicy(
            tables=tables,
            schemas=allow.get("schemas", ["main"]),
            catalogs=allow.get("catalogs", []),
            denied_function_names=denied.get("names", []),
            denied_function_patterns=tuple(denied.get("patterns", [])),
            **{k: limits[k] for k in _LIMIT_KEYS if k in limits},
            **{k: sandbox[k] for k in _SANDBOX_KEYS if k in sandbox},
        )
    except ValueError as exc:
        raise PolicyError(f"invalid guard policy: {exc}") from exc
    if base is not None:
        for attr in ("tables", "schemas", "catalogs"):
            widened = getattr(policy, attr) - getattr(base, attr)
            if widened:
                raise PolicyError(
                    f"an override cannot widen allowlist.{attr} (adds {sorted(widened)}); "
                    "change the project's guard policy file through review instead"
                )
    return policy


def load_policy(path: Path | str | None = None, overrides: dict[str, Any] | None = None, *,
                served: Iterable[str] | None = None, schemas: Iterable[str] | None = None,
                optional: bool = False) -> GuardPolicy:
    """Read the policy file (default: the bundled ``evals/guard_policy.yaml``) and apply
    ``overrides``. ``served`` are the snapshot's tables: the allowlist defaults to them and
    may only narrow them. With ``optional`` a missing file means "every default"."""
    p = Path(path) if path is not None else DEFAULT_POLICY_PATH
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if not optional:
            raise PolicyError(f"no guard policy at {p}") from None
        doc = {"version": 1}
    except yaml.YAMLError as exc:
        raise PolicyError(f"{p}: not valid YAML: {exc}") from exc
    if isinstance(doc, dict) and schemas is not None and "schemas" not in (doc.get("allowlist") or {}):
        doc = {**doc, "allowlist": {**(doc.get("allowlist") or {}), "schemas": sorted(set(schemas))}}
    served_set = frozenset(t.lower() for t in served) if served is not None else None
    return _from_document(doc, served=served_set, where=str(p)).with_overrides(overrides)


def project_policy(project: Any, manifest: Any, overrides: dict[str, Any] | None = None) -> GuardPolicy:
    """The guard policy of a project over its pinned snapshot: the project's policy file
    narrowing the snapshot's served tables (without one, the bundled policy's limits and
    denylist), plus a configuration's overrides."""
    path = project.guard_policy_path
    if not Path(path).exists():
        path = DEFAULT_POLICY_PATH
    return load_policy(path, overrides, served=list(manifest.tables),
                       schemas=[manifest.serving_schema])
