"""Great Expectations checks a mart must pass before a snapshot is accepted.

The suites are declared here as data (table → expectations), run in an *ephemeral* GX context
over pandas frames read from the warehouse, and any failure names the table, the expectation,
its arguments and what was observed. GX is imported lazily (its import alone takes seconds).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

STATUSES = ["placed", "shipped", "delivered", "cancelled", "returned"]
PAYMENT_METHODS = ["unified_payments", "card", "cod", "netbanking", "wallet"]


@dataclass(frozen=True)
class Exp:
    """One expectation: a GX expectation class name and its keyword arguments."""

    kind: str
    kwargs: dict[str, Any]


def _not_null(*cols: str) -> list[Exp]:
    return [Exp("ExpectColumnValuesToNotBeNull", {"column": c}) for c in cols]


def _unique(col: str) -> Exp:
    return Exp("ExpectColumnValuesToBeUnique", {"column": col})


def _in_set(col: str, values: list[Any]) -> Exp:
    return Exp("ExpectColumnValuesToBeInSet", {"column": col, "value_set": values})


def _between(col: str, lo: Any = None, hi: Any = None) -> Exp:
    return Exp("ExpectColumnValuesToBeBetween", {"column": col, "min_value": lo, "max_value": hi})


def _rows(lo: int, hi: int) -> Exp:
    return Exp("ExpectTableRowCountToBeBetween", {"min_value": lo, "max_value": hi})


def _equal(a: str, b: str) -> Exp:
    return Exp("ExpectColumnPairValuesToBeEqual", {"column_A": a, "column_B": b})


@dataclass
class TableSuite:
    table: str
    expectations: list[Exp]
    #: extra columns computed in SQL (integer paise identities, day offsets)
    derived: dict[str, str] = field(default_factory=dict)


def default_suites(first_day: dt.date, as_of: dt.date) -> list[TableSuite]:
    """The expectation suites for the demo marts, relative to the data window."""
    span = (as_of - first_day).days
    day_offset = lambda col: f"date_diff('day', DATE '{first_day.isoformat()}', {col})"  # noqa: E731
    paise = lambda expr: f"CAST(round(({expr}) * 100) AS BIGINT)"  # noqa: E731
    return [
        TableSuite(
            "fct_orders",
            [
                *_not_null("order_id", "customer_id", "order_date", "status", "payment_method",
                           "gross_revenue_inr", "discount_inr", "net_revenue_inr"),
                _unique("order_id"),
                _in_set("status", STATUSES),
                _in_set("payment_method", PAYMENT_METHODS),
                _between("gross_revenue_inr", 0, None),
                _between("discount_inr", 0, None),
                _between("net_revenue_inr", 0, None),
                _between("_day_offset", 0, span),
                _equal("_net_paise", "_gross_minus_discount_paise"),
                _equal("_total_paise", "_net_tax_shipping_paise"),
                _rows(50_000, 500_000),
            ],
            {
                "_day_offset": day_offset("order_date"),
                "_net_paise": paise("net_revenue_inr"),
                "_gross_minus_discount_paise": paise("gross_revenue_inr - discount_inr"),
                "_total_paise": paise("total_paid_inr"),
                "_net_tax_shipping_paise": paise("net_revenue_inr + tax_inr + shipping_fee_inr"),
            },
        ),
        TableSuite(
            "fct_order_items",
            [
                *_not_null("order_item_id", "order_id", "product_id", "quantity"),
                _unique("order_item_id"),
                _between("quantity", 1, 100),
                _between("unit_price_inr", 0, None),
                _equal("_net_paise", "_gross_minus_discount_paise"),
                _rows(50_000, 2_000_000),
            ],
            {
                "_net_paise": paise("net_revenue_inr"),
                "_gross_minus_discount_paise": paise("gross_revenue_inr - discount_inr"),
            },
        ),
        TableSuite(
            "mart_orders_daily",
            [
                *_not_null("order_date", "payment_method", "status", "orders"),
                _unique("_grain"),
                _in_set("status", STATUSES),
                _in_set("payment_method", PAYMENT_METHODS),
                _between("orders", 1, None),
                _between("_day_offset", 0, span),
                _equal("_net_paise", "_gross_minus_discount_paise"),
                _rows(1_000, 100_000),
            ],
            {
                "_grain": "order_date || '|' || payment_method || '|' || status",
                "_day_offset": day_offset("order_date"),
                "_net_paise": paise("net_revenue_inr"),
                "_gross_minus_discount_paise": paise("gross_revenue_inr - discount_inr"),
            },
        ),
        TableSuite(
            "mart_revenue_monthly",
            [
                *_not_null("order_month", "orders", "net_revenue_inr"),
                _unique("order_month"),
                _between("_day_offset", 0, span),
                _between("orders", 1, None),
                _equal("_net_paise", "_gross_minus_discount_paise"),
                _rows(12, 120),
            ],
            {
                "_day_offset": day_offset("order_month"),
                "_net_paise": paise("net_revenue_inr"),
                "_gross_minus_discount_paise": paise("gross_revenue_inr - discount_inr"),
            },
        ),
        TableSuite(
            "dim_customers",
            [
                *_not_null("customer_id", "segment_cd", "signup_date", "region"),
                _unique("customer_id"),
                _in_set("segment_cd", ["A", "B", "C"]),
                _in_set("region", ["North", "South", "East", "West"]),
                _between("lifetime_orders", 0, None),
                _rows(1_000, 1_000_000),
            ],
        ),
        TableSuite(
            "dim_segments",
            [*_not_null("segment_cd", "segment_name"), _unique("segment_cd"),
             _in_set("segment_cd", ["A", "B", "C"]), _rows(3, 3)],
        ),
        TableSuite(
            "dim_products",
            [*_not_null("product_id", "product_name", "category_name"), _unique("product_id"),
             _between("list_price_inr", 0, None), _rows(50, 100_000)],
        ),
        TableSuite(
            "fct_returns",
            [*_not_null("return_id", "order_id", "return_date", "refund_inr"),
             _unique("return_id"), _unique("order_id"), _between("refund_inr", 0, None),
             _in_set("reason", ["damaged", "wrong_item", "size_issue", "not_as_described",
                                "changed_mind"]),
             _rows(1, 1_000_000)],
        ),
    ]


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


class SnapshotValidationError(RuntimeError):
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


def validate_marts(
    warehouse: Path, suites: list[TableSuite], schema: str = "marts"
) -> ValidationReport:
    """Run every suite against ``schema`` tables of the warehouse (opened read-only)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    frames = {}
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        for suite in suites:
            extra = "".join(f", {expr} AS {name}" for name, expr in suite.derived.items())
            frames[suite.table] = con.sql(f"SELECT *{extra} FROM {schema}.{suite.table}").df()
    except duckdb.CatalogException as exc:
        raise SnapshotValidationError(
            ValidationReport({}, [ExpectationFailure(suite.table, "table exists", {}, str(exc))])
        ) from exc
    finally:
        con.close()

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    ds = ctx.data_sources.add_pandas("warehouse_marts")
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
