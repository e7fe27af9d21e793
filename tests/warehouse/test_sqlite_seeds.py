"""SQLite databases as dbt seeds (sqleval_pipeline.warehouse.sqlite_seeds).

Expected types come from SQLite's documented affinity rules (datatype3.html, section 3.1),
checked here against SQLite itself; loaded values are read back with DuckDB's CSV reader the
way dbt-duckdb's seed loader reads them (``COPY … FROM`` the file, header, comma), and compared
with what sqlite3 returns from the original database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest
import yaml

from sqleval_pipeline.warehouse.sqlite_seeds import (
    SeedConversionError, duckdb_type, sqlite_affinity, sqlite_to_dbt_seeds, write_serving_models,
)


def make_db(path: Path, script: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


def load_like_dbt_duckdb(project: Path, seed: str) -> list[tuple]:
    """The seed as dbt-duckdb loads it: a table with the configured column types, then
    ``COPY … FROM`` the CSV (its default, ``fast``, seed path)."""
    config = yaml.safe_load((project / "seeds" / "_seeds.yml").read_text())
    entry = next(s for s in config["seeds"] if s["name"] == seed)
    cols = ", ".join(f'"{c}" {t}' for c, t in entry["config"]["column_types"].items())
    con = duckdb.connect()
    try:
        con.execute(f'CREATE TABLE "{seed}" ({cols})')
        con.execute(f"COPY \"{seed}\" FROM '{project / 'seeds' / (seed + '.csv')}' "
                    "(FORMAT CSV, HEADER TRUE, DELIMITER ',')")
        return con.execute(f'SELECT * FROM "{seed}"').fetchall()
    finally:
        con.close()


def column_types(project: Path, seed: str) -> dict[str, str]:
    config = yaml.safe_load((project / "seeds" / "_seeds.yml").read_text())
    return next(s for s in config["seeds"] if s["name"] == seed)["config"]["column_types"]


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize("declared, affinity, duck", [
    ("INTEGER", "INTEGER", "BIGINT"), ("int", "INTEGER", "BIGINT"), ("BIGINT", "INTEGER", "BIGINT"),
    ("UNSIGNED BIG INT", "INTEGER", "BIGINT"), ("FLOATING POINT", "INTEGER", "BIGINT"),
    ("TEXT", "TEXT", "VARCHAR"), ("varchar(20)", "TEXT", "VARCHAR"), ("NCHAR(55)", "TEXT", "VARCHAR"),
    ("CLOB", "TEXT", "VARCHAR"), ("BLOB", "BLOB", "VARCHAR"), ("", "BLOB", "VARCHAR"),
    ("REAL", "REAL", "DOUBLE"), ("FLOAT", "REAL", "DOUBLE"), ("DOUBLE PRECISION", "REAL", "DOUBLE"),
    ("NUMERIC", "NUMERIC", "DOUBLE"), ("DECIMAL(10,5)", "NUMERIC", "DOUBLE"),
    ("DATE", "NUMERIC", "VARCHAR"), ("datetime", "NUMERIC", "VARCHAR"), ("BOOLEAN", "NUMERIC", "VARCHAR"),
    ("year", "NUMERIC", "VARCHAR"),
])
def test_declared_types_follow_sqlite_affinity(declared, affinity, duck):
    assert sqlite_affinity(declared) == affinity
    assert duckdb_type(declared) == duck


@pytest.mark.parametrize("declared", ["INTEGER", "int", "FLOATING POINT", "varchar(20)", "CLOB",
                                      "BLOB", "", "REAL", "DOUBLE PRECISION", "NUMERIC",
                                      "DECIMAL(10,5)", "DATE", "BOOLEAN"])
def test_the_affinity_is_the_one_sqlite_applies(declared):
    """SQLite itself tells the affinities apart by what it stores: '5' and 5 and '5.5' inserted
    into the column (INTEGER and NUMERIC store alike; they differ only in CAST)."""
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE t (c {declared})")
    con.executemany("INSERT INTO t VALUES (?)", [("5",), (5,), ("5.5",)])
    stored = tuple(r[0] for r in con.execute("SELECT typeof(c) FROM t ORDER BY rowid"))
    by_storage = {("integer", "integer", "real"): {"INTEGER", "NUMERIC"},
                  ("text", "text", "text"): {"TEXT"},
                  ("text", "integer", "text"): {"BLOB"},
                  ("real", "real", "real"): {"REAL"}}
    assert sqlite_affinity(declared) in by_storage[stored]


# --------------------------------------------------------------------------- values


SCRIPT = """
CREATE TABLE "Singer" ("Singer_ID" int, "Name" varchar(20), "Age" INTEGER, "Weight" REAL,
                       "Credits" NUMERIC, "Song_release_year" text, "Joined" datetime,
                       PRIMARY KEY ("Singer_ID"));
INSERT INTO "Singer" VALUES (1, 'Joe "JJ" Sharp', 52, 71.5, 90, '1992', '2019-03-01');
INSERT INTO "Singer" VALUES (2, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO "Singer" VALUES (3, '  padded  ', 29, 60, 45, 2013, '2020-01-02');
INSERT INTO "Singer" VALUES (4, 'NULL', 32, 0.1, 7, '08', 'null');
INSERT INTO "Singer" VALUES (5, 'two
lines, and a comma', 41, 1e-7, 3, '', NULL);
"""


def test_round_trip_keeps_values_nulls_and_text(tmp_path):
    db = make_db(tmp_path / "music.sqlite", SCRIPT.replace("'', NULL);", "'2001', NULL);"))
    project = tmp_path / "dbt"
    assert sqlite_to_dbt_seeds([db], project) == ["Singer"]
    assert column_types(project, "Singer") == {
        "Singer_ID": "BIGINT", "Name": "VARCHAR", "Age": "BIGINT", "Weight": "DOUBLE",
        "Credits": "BIGINT",  # NUMERIC holding only integers: SQLite computes with integers
        "Song_release_year": "VARCHAR", "Joined": "VARCHAR"}
    csv = (project / "seeds" / "Singer.csv").read_text()
    assert csv.splitlines()[:3] == [
        '"Singer_ID","Name","Age","Weight","Credits","Song_release_year","Joined"',
        '1,"Joe ""JJ"" Sharp",52,71.5,90,"1992","2019-03-01"',
        "2,,,,,,",
    ]
    want = [(1, 'Joe "JJ" Sharp', 52, 71.5, 90, "1992", "2019-03-01"),
            (2, None, None, None, None, None, None),
            (3, "  padded  ", 29, 60.0, 45, "2013", "2020-01-02"),  # 2013 into text: '2013'
            (4, "NULL", 32, 0.1, 7, "08", "null"),                  # the text 'NULL' stays text
            (5, "two\nlines, and a comma", 41, 1e-7, 3, "2001", None)]
    lite = sqlite3.connect(db)
    assert lite.execute('SELECT * FROM "Singer" ORDER BY rowid').fetchall() == want
    lite.close()
    assert load_like_dbt_duckdb(project, "Singer") == want
    seeds = yaml.safe_load((project / "seeds" / "_seeds.yml").read_text())["seeds"]
    assert seeds[0]["config"]["quote_columns"] is True and seeds[0]["config"]["schema"] == "raw"
    assert seeds[0]["meta"]["sqlite_declared_types"]["Joined"] == "datetime"


def test_a_numeric_column_with_fractions_is_double(tmp_path):
    db = make_db(tmp_path / "a.sqlite", "CREATE TABLE t (x NUMERIC, y DECIMAL(8,2));"
                 "INSERT INTO t VALUES (1, 2.5), (2.5, 3), (NULL, NULL);")
    sqlite_to_dbt_seeds([db], tmp_path / "dbt")
    assert column_types(tmp_path / "dbt", "t") == {"x": "DOUBLE", "y": "DOUBLE"}
    assert load_like_dbt_duckdb(tmp_path / "dbt", "t") == [(1.0, 2.5), (2.5, 3.0), (None, None)]


def test_an_empty_string_is_refused_unless_null_is_accepted(tmp_path):
    db = make_db(tmp_path / "music.sqlite", SCRIPT)
    with pytest.raises(SeedConversionError, match=r"music.sqlite: table 'Singer', column "
                       r"'Song_release_year' .*rowid 5 holds an empty string.*NULL"):
        sqlite_to_dbt_seeds([db], tmp_path / "dbt")
    assert not (tmp_path / "dbt" / "seeds").exists()  # nothing written
    sqlite_to_dbt_seeds([db], tmp_path / "dbt", empty_strings="null")
    rows = load_like_dbt_duckdb(tmp_path / "dbt", "Singer")
    assert rows[4][5] is None  # '' became NULL, as documented


def test_a_table_name_clash_between_databases_is_refused(tmp_path):
    a = make_db(tmp_path / "concert.sqlite", "CREATE TABLE singer (id int); INSERT INTO singer VALUES (1);")
    b = make_db(tmp_path / "music.sqlite", "CREATE TABLE Singer (id int); INSERT INTO Singer VALUES (2);")
    with pytest.raises(SeedConversionError, match=r"clash: music.sqlite and concert.sqlite both have "
                       r"a table 'Singer' \('singer'\).*case-insensitively"):
        sqlite_to_dbt_seeds([a, b], tmp_path / "dbt")
    assert not (tmp_path / "dbt").exists()


@pytest.mark.parametrize("script, value, widened, rows", [
    # text in an INTEGER column: only VARCHAR holds both (the numbers become their text)
    ("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), ('n/a');", "'n/a'", "VARCHAR",
     [("1",), ("n/a",)]),
    # a fraction in an INTEGER column (SQLite keeps 2.5 as REAL): DOUBLE holds both exactly
    ("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2.5);", "2.5", "DOUBLE", [(1.0,), (2.5,)]),
    # an integer in a date column (NUMERIC affinity keeps 2019 an integer)
    ("CREATE TABLE t (x date); INSERT INTO t VALUES ('2019-01-01'), (2019);", "2019", "VARCHAR",
     [("2019-01-01",), ("2019",)]),
    # numbers only in a date column: BIGINT, the type SQLite computes with
    ("CREATE TABLE t (x date); INSERT INTO t VALUES (2018), (2019);", "2019", "BIGINT", [(2018,), (2019,)]),
    ("CREATE TABLE t (x REAL); INSERT INTO t VALUES (1.5), ('abc');", "'abc'", "VARCHAR",
     [("1.5",), ("abc",)]),
])
def test_a_value_its_type_cannot_hold_is_refused_or_widened(tmp_path, script, value, widened, rows):
    db = make_db(tmp_path / "d.sqlite", script)
    first = 1 if widened == "BIGINT" else 2
    with pytest.raises(SeedConversionError, match=rf"table 't', column 'x'.*rowid {first} holds "
                       rf"\w+ {value if first == 2 else 2018}.*strict=False"):
        sqlite_to_dbt_seeds([db], tmp_path / "dbt")
    sqlite_to_dbt_seeds([db], tmp_path / "dbt", strict=False)
    assert column_types(tmp_path / "dbt", "t") == {"x": widened}
    assert load_like_dbt_duckdb(tmp_path / "dbt", "t") == rows
    entry = yaml.safe_load((tmp_path / "dbt" / "seeds" / "_seeds.yml").read_text())["seeds"][0]
    assert entry["columns"][0]["name"] == "x"
    assert f"{widened} holds every stored value" in entry["columns"][0]["description"]


def test_blobs_and_odd_names_are_refused(tmp_path):
    blob = make_db(tmp_path / "b.sqlite", "CREATE TABLE t (x BLOB); INSERT INTO t VALUES (x'00ff');")
    with pytest.raises(SeedConversionError, match="rowid 1 holds a BLOB"):
        sqlite_to_dbt_seeds([blob], tmp_path / "dbt")
    odd = make_db(tmp_path / "o.sqlite", 'CREATE TABLE "my table" (x int);')
    with pytest.raises(SeedConversionError, match="not a plain identifier"):
        sqlite_to_dbt_seeds([odd], tmp_path / "dbt")
    with pytest.raises(SeedConversionError, match="no such SQLite file"):
        sqlite_to_dbt_seeds([tmp_path / "missing.sqlite"], tmp_path / "dbt")
    (tmp_path / "not.sqlite").write_text("hello")
    with pytest.raises(SeedConversionError, match="not a SQLite database"):
        sqlite_to_dbt_seeds([tmp_path / "not.sqlite"], tmp_path / "dbt")


def test_files_it_did_not_write_are_never_overwritten(tmp_path):
    db = make_db(tmp_path / "d.sqlite", "CREATE TABLE t (x int); INSERT INTO t VALUES (1);")
    project = tmp_path / "dbt"
    (project / "seeds").mkdir(parents=True)
    (project / "seeds" / "_seeds.yml").write_text("version: 2\nseeds: []\n")
    with pytest.raises(SeedConversionError, match="_seeds.yml exists and was not written"):
        sqlite_to_dbt_seeds([db], project)
    sqlite_to_dbt_seeds([db], project, overwrite=True)
    make_db(db, "INSERT INTO t VALUES (2);")
    assert sqlite_to_dbt_seeds([db], project) == ["t"]  # its own files: rewritten
    assert load_like_dbt_duckdb(project, "t") == [(1,), (2,)]
    (project / "seeds" / "u.csv").write_text("x\n1\n")
    other = make_db(tmp_path / "e.sqlite", "CREATE TABLE u (x int);")
    with pytest.raises(SeedConversionError, match="u.csv exists and was not written"):
        sqlite_to_dbt_seeds([db, other], project)


def test_serving_models_are_views_under_the_table_names(tmp_path):
    assert write_serving_models(["artist", "Singer"], tmp_path, tag="bench") == ["srv_artist", "srv_Singer"]
    text = (tmp_path / "models" / "served" / "srv_Singer.sql").read_text()
    assert "alias='Singer'" in text and "tags=['bench']" in text and "ref('Singer')" in text
    assert write_serving_models(["artist"], tmp_path) == ["srv_artist"]  # its own file: rewritten
    (tmp_path / "models" / "served" / "srv_mine.sql").write_text("select 1\n")
    with pytest.raises(SeedConversionError, match="srv_mine.sql exists"):
        write_serving_models(["mine"], tmp_path)
    with pytest.raises(SeedConversionError, match="not a plain identifier"):
        write_serving_models(["bad name"], tmp_path)


def test_text_that_is_not_utf8_is_refused_and_without_rowid_tables_convert(tmp_path):
    con = sqlite3.connect(tmp_path / "latin.sqlite")
    con.execute("CREATE TABLE t (x text)")
    con.execute("INSERT INTO t VALUES (CAST(x'e9' AS TEXT))")  # a lone latin-1 byte
    con.commit()
    con.close()
    with pytest.raises(SeedConversionError, match=r"latin.sqlite: table 't': cannot be read"):
        sqlite_to_dbt_seeds([tmp_path / "latin.sqlite"], tmp_path / "dbt")
    db = make_db(tmp_path / "w.sqlite", "CREATE TABLE k (id int PRIMARY KEY, v text) WITHOUT ROWID;"
                 "INSERT INTO k VALUES (2, 'b'), (1, 'a');")
    assert sqlite_to_dbt_seeds([db], tmp_path / "dbt") == ["k"]
    assert sorted(load_like_dbt_duckdb(tmp_path / "dbt", "k")) == [(1, "a"), (2, "b")]
