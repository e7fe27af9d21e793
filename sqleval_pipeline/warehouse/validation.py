"""Great Expectations checks the served tables must pass before a snapshot is accepted.

A project declares its suites (``validation:`` in ``sqleval.yaml``): ``dbt_tests`` derives
them from the dbt generic tests on the served models (checked again on the frozen copy),
a path names an expectations YAML file (:func:`load_suites`), ``none`` skips validation.
They run in an *ephemeral* GX context over pandas frames read from the freshly built serving
file, and any failure names the table, the expectation, its arguments and what was observed.
GX is imported lazily (its import alone takes seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import yaml
from sqleval_pipeline.errors import SqlevalError

@dataclass(frozen=True)
class Exp:
    """One expectation: a GX expectation class name and its keyword arguments."""

    kind: str
    kwargs: dict[str, Any]


@dataclass
class TableSuite:
    table: str
    expectations: list[Exp]
    #: extra columns computed in SQL (e.g. integer identities, day offsets) to check
    derived: dict[str, str] = field(default_factory=dict)
    #: where the suite was declared (a file, or the dbt test it was derived from)
    source: str = ""


class SuitesError(SqlevalError, ValueError):
    """An expectations file is invalid; the message names the file and the entry."""


def load_suites(path: Path) -> list[TableSuite]:
    """Read an expectations file::

        version: 1
        tables:
          <served table>:
            expectations:
              - {expect: ExpectColumnValuesToNotBeNull, column: order_id}
            derived: {<name>: <SQL expression>}
    """
    # Great Expectations (~3 s to import): only when suites are read or run
    import great_expectations as gx

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuitesError(f"no expectations file at {path} (the project's `validation:` "
                          "names it); fix the path, or use `validation: dbt_tests`") from None
    except yaml.YAMLError as exc:
        raise SuitesError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("tables"), dict):
        raise SuitesError(f"{path}: expected a mapping with `tables: {{<table>: "
                          "{expectations: [...]}}}`")
    suites = []
    for table, entry in doc["tables"].items():
        where = f"{path}: tables.{table}"
        if not isinstance(entry, dict) or not isinstance(entry.get("expectations"), list):
            raise SuitesError(f"{where}: needs an `expectations:` list")
        unknown = set(entry) - {"expectations", "derived"}
        if unknown:
            raise SuitesError(f"{where}: unknown key(s) {sorted(unknown)}")
        exps = []
        for i, e in enumerate(entry["expectations"]):
            if not isinstance(e, dict) or "expect" not in e:
                raise SuitesError(f"{where}.expectations[{i}]: needs `expect: <GX class name>`")
            kind = e["expect"]
            if not hasattr(gx.expectations, kind):
                raise SuitesError(f"{where}.expectations[{i}]: {kind!r} is not a Great "
                                  "Expectations expectation class")
            exps.append(Exp(kind, {k: v for k, v in e.items() if k != "expect"}))
        suites.append(TableSuite(str(table), exps, dict(entry.get("derived") or {}), str(path)))
    return suites


#: dbt generic tests and the GX expectation each one becomes
_DBT_TESTS = {"not_null": "ExpectColumnValuesToNotBeNull", "unique": "ExpectColumnValuesToBeUnique",
              "accepted_values": "ExpectColumnValuesToBeInSet"}


def suites_from_dbt_tests(manifest: dict[str, Any], served: dict[str, str],
                          run_results: dict[str, Any] | None = None) -> tuple[list[TableSuite], list[str]]:
    """Suites derived from the dbt generic tests on the served models (``served``: dbt
    unique_id → served table name): ``not_null``, ``unique`` and ``accepted_values`` become
    GX expectations, checked again on the frozen copy. With ``run_results`` only tests that
    ran and passed in the last dbt build are used. Returns (suites, skipped tests with why)."""
    ran = None
    if run_results is not None:
        ran = {r["unique_id"] for r in run_results.get("results", []) if r.get("status") == "pass"}
    by_table: dict[str, TableSuite] = {}
    skipped = []
    for uid, node in sorted(manifest.get("nodes", {}).items()):
        if node.get("resource_type") != "test":
            continue
        meta = node.get("test_metadata") or {}
        target = node.get("attached_node") or next(iter((node.get("depends_on") or {}).get("nodes", [])), None)
        if target not in served:
            continue
        name = meta.get("name")
        if ran is not None and uid not in ran:
            skipped.append(f"{uid}: did not run (or did not pass) in the last dbt build")
            continue
        kind = _DBT_TESTS.get(name or "")
        column = node.get("column_name") or (meta.get("kwargs") or {}).get("column_name")
        if kind is None or not column:
            skipped.append(f"{uid}: no Great Expectations equivalent for dbt test {name or 'singular'!r}")
            continue
        kwargs: dict[str, Any] = {"column": column}
        if name == "accepted_values":
            values = (meta.get("kwargs") or {}).get("values")
            if not isinstance(values, list):
                skipped.append(f"{uid}: accepted_values without a literal list")
                continue
            kwargs["value_set"] = values
        suite = by_table.setdefault(served[target], TableSuite(served[target], [], source="dbt tests"))
        suite.expectations.append(Exp(kind, kwargs))
    return list(by_table.values()), skipped


@dataclass
class ExpectationFailure:
    table: str
    expectation: str
    kwargs: dict[str, Any]
    observed: Any

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if k != "batch_id")
        return f"{self.table}: {self.expectation}({args}) failed — observed {self.observed}"


@dataclass
class ValidationReport:
    tables: dict[str, int]  # table -> number of expectations evaluated
    failures: list[ExpectationFailure]

    @property
    def success(self) -> bool:
        return not self.failures

    @property
    def evaluated(self) -> int:
        return sum(self.tables.values())


class SnapshotValidationError(SqlevalError, RuntimeError):
    """A mart failed a Great Expectations check; the snapshot is not accepted."""

    def __init__(self, report: ValidationReport):
        self.report = report
        lines = "\n  ".join(str(f) for f in report.failures)
        super().__init__(
            f"{len(report.failures)} Great Expectations check(s) failed; the snapshot was not "
            f"frozen. Fix the warehouse (dbt models or raw data) and rebuild:\n  {lines}"
        )


def _observed(result: dict[str, Any]) -> Any:
    if "observed_value" in result:
        return result["observed_value"]
    if "unexpected_count" in result:
        sample = result.get("partial_unexpected_list", [])[:5]
        return f"{result['unexpected_count']} unexpected value(s), e.g. {sample}"
    return result


def validate_tables(
    database: Path, suites: list[TableSuite], schema: str = "main"
) -> ValidationReport:
    """Run every suite against ``schema`` tables of a DuckDB file (opened read-only)."""
    # Great Expectations (~3 s to import): only when suites are read or run
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    frames = {}
    con = duckdb.connect(str(database), read_only=True)
    try:
        for suite in suites:
            extra = "".join(f", {expr} AS {name}" for name, expr in suite.derived.items())
            frames[suite.table] = con.sql(
                f'SELECT *{extra} FROM "{schema}"."{suite.table}"').df()
    except duckdb.Error as exc:
        raise SnapshotValidationError(ValidationReport({}, [ExpectationFailure(
            suite.table, "table is served and its derived columns compute",
            {"declared in": suite.source}, str(exc).splitlines()[0])])) from exc
    finally:
        con.close()

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    ds = ctx.data_sources.add_pandas("served_tables")
    failures: list[ExpectationFailure] = []
    counts: dict[str, int] = {}
    for suite in suites:
        asset = ds.add_dataframe_asset(name=suite.table)
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(
            batch_parameters={"dataframe": frames[suite.table]}
        )
        gx_suite = ctx.suites.add(gx.ExpectationSuite(name=f"snapshot.{suite.table}"))
        for exp in suite.expectations:
            gx_suite.add_expectation(getattr(gx.expectations, exp.kind)(**exp.kwargs))
        result = batch.validate(gx_suite)
        counts[suite.table] = len(result.results)
        for r in result.results:
            if not r.success:
                failures.append(
                    ExpectationFailure(
                        suite.table, r.expectation_config.type, dict(r.expectation_config.kwargs),
                        _observed(r.result),
                    )
                )
    return ValidationReport(counts, failures)

