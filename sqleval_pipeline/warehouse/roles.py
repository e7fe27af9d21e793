"""What a served column is for, from its name and DuckDB type: one rule for every reader.

The golden proposer (:mod:`sqleval_pipeline.golden.vocabulary`) and the bundled baseline
generator (:mod:`sqleval_pipeline.generation.baseline_vocab`) both ask these questions; they
used to answer them with vocabularies that disagreed on what a key is.

* **key**: a column named ``id`` or ending ``_id``, ``_key``, ``_sk``, ``_pk``, ``_fk``, ``_cd``
  or ``_code``: it identifies a row (its own table's or another's) and joins on it; it is
  never summed. The catalog declares no primary or unique keys, so the name decides.
* **identifier-like numbers**: ``*_no``, ``*_number``, zip and postal codes, phone numbers,
  years and months are numbers that name something, not quantities: not keys, not measures.
* **measure**: a numeric column that is neither of the above (``amount``, ``quantity``).
* **time**: a DATE or TIMESTAMP column; **text**: VARCHAR and its spellings.

>>> [role(n, t) for n, t in [("order_id", "BIGINT"), ("net_revenue", "DECIMAL(18,2)"),
...                           ("order_year", "INTEGER"), ("state_code", "VARCHAR"),
...                           ("placed_at", "TIMESTAMP"), ("city", "VARCHAR"), ("gap", "INTERVAL")]]
['key', 'measure', 'number', 'key', 'time', 'text', 'other']
>>> key_stem("Customer_SK"), key_stem("id"), key_stem("city")
('customer', '', None)
"""

from __future__ import annotations

import re

#: name endings of a key column (besides ``id`` itself)
KEY_SUFFIXES = ("_id", "_key", "_sk", "_pk", "_fk", "_cd", "_code")
_KEY_SUFFIX = re.compile(r"_(id|key|sk|pk|fk|cd|code)$")
#: names of numbers that identify or label, never added up
_LABEL_NUMBER = re.compile(r"(_no$|_number$|zip|postal|phone|year$|month$|^month|^year)")
_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|"
                      r"UBIGINT|UHUGEINT|FLOAT|REAL|DOUBLE|DECIMAL.*|NUMERIC.*)$")
_TEXT = ("VARCHAR", "TEXT", "STRING", "ENUM", "CHAR")


def is_key(name: str) -> bool:
    """A key column: ``id``, or a name ending in one of :data:`KEY_SUFFIXES`."""
    n = name.lower()
    return n == "id" or n.endswith(KEY_SUFFIXES)


def key_stem(name: str) -> str | None:
    """A key's name without its key ending, lower-case (``customer_sk`` → ``customer``, ``id``
    → ``""``); None for a column that is not a key."""
    n = name.lower()
    if n == "id":
        return ""
    return _KEY_SUFFIX.sub("", n) if is_key(n) else None


def is_id_reference(name: str) -> bool:
    """A column ending ``_id``: it names a row of some entity (``customer_id``), so counting
    its distinct values counts that entity."""
    return name.lower().endswith("_id")


def is_label_number(name: str) -> bool:
    """A number that names something (``policy_no``, ``zip``, ``phone``, ``order_year``)."""
    return bool(_LABEL_NUMBER.search(name.lower()))


def is_numeric(type_: str) -> bool:
    """A DuckDB numeric type (integers, floats, DECIMAL/NUMERIC of any precision); INTERVAL is
    not one."""
    return bool(_NUMERIC.match(type_.strip().upper()))


def is_time(type_: str) -> bool:
    """DATE, TIMESTAMP and TIMESTAMP WITH TIME ZONE (and the other TIMESTAMP_* types)."""
    return type_.strip().upper().startswith(("DATE", "TIMESTAMP"))


def is_text(type_: str) -> bool:
    return type_.strip().upper().startswith(_TEXT)


def is_measure(name: str, type_: str) -> bool:
    """A numeric column that is not a key and not a labelling number: what can be added up."""
    return is_numeric(type_) and not is_key(name) and not is_label_number(name)


def role(name: str, type_: str) -> str:
    """``key``, ``measure``, ``number`` (a labelling number), ``time``, ``text`` or ``other``."""
    if is_key(name):
        return "key"
    if is_numeric(type_):
        return "number" if is_label_number(name) else "measure"
    if is_time(type_):
        return "time"
    if is_text(type_):
        return "text"
    return "other"


__all__ = ["KEY_SUFFIXES", "is_id_reference", "is_key", "is_label_number", "is_measure",
           "is_numeric", "is_text", "is_time", "key_stem", "role"]
