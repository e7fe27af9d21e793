"""Typed result sets and their lossless JSON encoding.

A :class:`ResultSet` is what a query returned: column names, DuckDB type names and rows of
Python values (``int``, ``Decimal``, ``float``, ``str``, ``bool``, ``date``, ``datetime``,
``None`` ...). The JSON form keeps every value distinguishable from every other: a DECIMAL is
stored as a string and decoded back to :class:`~decimal.Decimal` *because its column type says
so*, so a VARCHAR ``'4'`` never turns into the number 4 and a DATE never into its ISO string.

>>> rs = ResultSet(columns=["d", "n"], types=["DATE", "DECIMAL(18,2)"],
...                rows=[[date(2025, 1, 2), Decimal("1.50")]])
>>> ResultSet.from_json(rs.to_json()).rows
[[datetime.date(2025, 1, 2), Decimal('1.50')]]
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
import re
import uuid
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field, model_validator

date = _dt.date
datetime = _dt.datetime

_LIST_RE = re.compile(r"^(?P<inner>.+)\[\d*\]$")


def encode_value(value: Any) -> Any:
    """Encode one Python value as JSON-safe data (see module doc)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return {"days": value.days, "seconds": value.seconds, "microseconds": value.microseconds}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    return str(value)


def decode_value(value: Any, type_name: str) -> Any:
    """Decode a value produced by :func:`encode_value` using the column's DuckDB type."""
    if value is None:
        return None
    t = type_name.upper().strip()
    m = _LIST_RE.match(t)
    if m and isinstance(value, list):
        return [decode_value(v, m.group("inner")) for v in value]
    if t.startswith("DECIMAL") or t.startswith("NUMERIC"):
        return Decimal(str(value))
    if t in {"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"}:
        if isinstance(value, str):
            return float(value.replace("Infinity", "inf"))
        return float(value)
    if t == "DATE":
        return _dt.date.fromisoformat(value)
    if t.startswith("TIMESTAMP") or t == "DATETIME":
        return _dt.datetime.fromisoformat(value)
    if t.startswith("TIME"):
        return _dt.time.fromisoformat(value)
    if t == "INTERVAL" and isinstance(value, dict):
        return _dt.timedelta(**value)
    if t == "UUID":
        return uuid.UUID(value)
    if t == "BLOB" and isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value


class ResultSet(BaseModel):
    """Columns, DuckDB types and rows of one query result."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_shape(self) -> ResultSet:
        if len(self.columns) != len(self.types):
            raise ValueError(
                f"columns ({len(self.columns)}) and types ({len(self.types)}) differ in length"
            )
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(
                    f"row {i} has {len(row)} values but there are {len(self.columns)} columns"
                )
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "types": list(self.types),
            "rows": [[encode_value(v) for v in row] for row in self.rows],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResultSet:
        types = list(data["types"])
        rows = [[decode_value(v, t) for v, t in zip(row, types, strict=False)] for row in data["rows"]]
        return cls(columns=list(data["columns"]), types=types, rows=rows)

    @property
    def row_count(self) -> int:
        return len(self.rows)
