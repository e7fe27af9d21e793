"""Load the generated raw CSV files into the warehouse's raw schemas (the EL step before dbt)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from sqleval_pipeline.demo.rawgen import RAW_TABLES


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def load_raw(raw_dir: Path, warehouse: Path) -> dict[str, int]:
    """Replace the raw tables in ``warehouse`` from ``raw_dir``; return row counts per table.

    Types are explicit (no sniffing), so the same files give the same tables everywhere.
    """
    missing = [t.filename for t in RAW_TABLES if not (raw_dir / t.filename).exists()]
    if missing:
        raise FileNotFoundError(
            f"raw files missing in {raw_dir}: {', '.join(missing)}; run `sqleval warehouse build`"
        )
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    con = duckdb.connect(str(warehouse))
    try:
        con.execute("BEGIN")
        for t in RAW_TABLES:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {t.schema}")
            cols = ", ".join(f"{_quote(c)}: {_quote(ty)}" for c, ty in t.columns)
            path = (raw_dir / t.filename).as_posix()
            con.execute(
                f"CREATE OR REPLACE TABLE {t.schema}.{t.name} AS SELECT * FROM read_csv("
                f"{_quote(path)}, header = true, columns = {{{cols}}}, auto_detect = false, "
                "quote = '\"', escape = '\"', nullstr = '')"
            )
            counts[f"{t.schema}.{t.name}"] = con.execute(
                f"SELECT count(*) FROM {t.schema}.{t.name}"
            ).fetchall()[0][0]
        con.execute("COMMIT")
    finally:
        con.close()
    return counts
