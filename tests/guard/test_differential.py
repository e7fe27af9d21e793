"""Differential fuzz: the statement filter (sqlglot) against DuckDB itself.

Seeds are the golden reference queries and the hostile cases (instantiated on the demo).
Hypothesis mutates them at DuckDB's own token boundaries (``duckdb.tokenize``, so the
insertion points do not depend on the character scan's notion of literals):

* inserts a Unicode format / separator / non-ASCII space / control character;
* inserts comments (``/**/``, ``--x\\n``) and ordinary whitespace (tab, LF, CRLF);
* rewrites a served table after FROM/JOIN as ``"t"``, ``main."t"``, ``"<snapshot id>".main.t``,
  ``MAIN.T``;
* re-cases keywords (``SeLeCt``).

Properties: (a) a text with a suspicious character at a token boundary is refused by the
filter; (b) for a text the filter allows, the tables it reports equal the tables DuckDB
binds (``EXPLAIN (FORMAT json)`` with ``explain_output='all'`` on a plain read-only
connection to the serving snapshot, walked below), DuckDB binds no table function, and
every table is on the allowlist.

The regression list pins the differentials found while writing this: DuckDB treats ZWSP,
BOM and WORD JOINER as spaces (it strips Unicode spaces before lexing), sqlglot keeps them
inside an identifier — so ``FROM fct_orders t<ZWSP>CROSS<ZWSP>JOIN<ZWSP>pg_settings`` was
allowed by the filter as a read of ``fct_orders`` while DuckDB cross-joined ``pg_settings``.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqleval_pipeline.demo.location import DEMO_SENSITIVE
from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.guard.characters import is_suspicious
from sqleval_pipeline.guard.hostile import HOSTILE_DIR, HostileContext, instantiate, load_templates
from sqleval_pipeline.guard.statement_filter import Refusal

#: characters to insert: every refused BMP format/separator/space, plus some controls
SUSPICIOUS = sorted({chr(cp) for cp in range(0x10000)
                     if unicodedata.category(chr(cp)) in {"Cf", "Zl", "Zp"}
                     or (unicodedata.category(chr(cp)) == "Zs" and cp != 0x20)}
                    | set("\x00\x01\x0b\x0c\x1b\x7f\x85\x9f"))
BENIGN_SEPARATORS = (" /**/ ", "/**/", " --x\n", "--\n", "\t", "\n", "\r\n", " /* a /* b */ c */ ")
SEPARATOR_CHARS_DUCKDB_STRIPS = ("\u200b", "\ufeff", "\u2060")
#: ``SQLEVAL_FUZZ_EXAMPLES=5000 SQLEVAL_FUZZ_RANDOM=1`` for a longer, non-deterministic hunt
FUZZ_EXAMPLES = int(os.environ.get("SQLEVAL_FUZZ_EXAMPLES", "200"))
FUZZ_RANDOM = bool(os.environ.get("SQLEVAL_FUZZ_RANDOM"))
_BIG_NUMBER = re.compile(r"\d{7,}")
_FROMISH = {"from", "join"}


# --------------------------------------------------------------------------- DuckDB's view


#: plan leaves that read no table and call no table function
_DATA_FREE_LEAVES = {"DUMMY_SCAN", "EMPTY_RESULT", "CTE_SCAN", "DELIM_SCAN", "DELIM_GET", "CHUNK_SCAN",
                     "CHUNK_GET", "EXPRESSION_GET", "EXPRESSION_SCAN", "COLUMN_DATA_SCAN", "REC_CTE_SCAN",
                     "REC_REC_CTE_SCAN", "RECURSIVE_CTE_SCAN", "RECURSIVE_RECURRING_CTE_SCAN", "DUMMY"}


def _walk(node, tables: set[str], functions: set[str]) -> None:
    """Collect scanned tables and table functions of one EXPLAIN JSON plan.

    A node with ``Table`` in its ``extra_info`` scans that table; a node with ``Function``
    (physical plans) calls that table function; any other leaf not in
    :data:`_DATA_FREE_LEAVES` (logical plans name a function scan after the function, e.g.
    ``DUCKDB_SETTINGS``) is counted as a table function — unknown leaves fail loudly.
    """
    for n in node if isinstance(node, list) else [node]:
        if not isinstance(n, dict):
            continue
        name = str(n.get("name") or "")
        info = n.get("extra_info") or {}
        info = info if isinstance(info, dict) else {}
        children = n.get("children") or []
        table = info.get("Table")
        func = info.get("Function")
        if isinstance(table, str) and table:
            tables.add(table.rsplit(".", 1)[-1].strip('"').lower())
        elif isinstance(func, str) and func:
            functions.add(func.lower())
        elif not children and name.upper() not in _DATA_FREE_LEAVES:
            functions.add(name.lower())
        _walk(children, tables, functions)


def duckdb_binds(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[set[str], set[str]] | None:
    """(tables, table functions) DuckDB binds for ``sql`` — None when DuckDB cannot plan it."""
    try:
        rows = con.execute("EXPLAIN (FORMAT json) " + sql).fetchall()
    except duckdb.PermissionException as exc:  # external access is off: a file read was planned
        raise AssertionError(f"DuckDB planned a file/network access the filter allowed: {exc}") from None
    except duckdb.Error:
        return None
    tables: set[str] = set()
    functions: set[str] = set()
    for _kind, text in rows:
        try:
            _walk(json.loads(text), tables, functions)
        except json.JSONDecodeError:
            continue
    return tables, functions


# --------------------------------------------------------------------------- seeds


def _golden_seeds() -> list[str]:
    out = []
    for c in load_golden(location.EVALS_DIR / "golden").cases:
        out += [s for s in [c.reference_sql, *(c.alternative_sqls or [])] if s]
    return out


@pytest.fixture(scope="module")
def explain_con(serving_snapshot):
    con = duckdb.connect(str(serving_snapshot.path), read_only=True,
                         config={"enable_external_access": False, "memory_limit": "512MB", "threads": 1})
    con.execute("SET explain_output='all'")
    yield con
    con.close()


@pytest.fixture(scope="module")
def seeds(serving_snapshot):
    ctx = HostileContext.from_manifest(serving_snapshot.manifest, DEMO_SENSITIVE)
    files = [HOSTILE_DIR / "sql.jsonl", HOSTILE_DIR / "guard_v2.jsonl"]
    hostile = [c.sql for c in instantiate(load_templates(files), ctx).cases if c.sql]
    golden = _golden_seeds()
    assert len(golden) >= 50 and len(hostile) >= 250
    return golden, hostile


@pytest.fixture(scope="module")
def served(serving_snapshot):
    return {n.lower() for n in serving_snapshot.manifest.tables}


# --------------------------------------------------------------------------- mutations


def _tokens(sql: str) -> list[tuple[int, str]] | None:
    """(char offset, DuckDB token type) of each token; None when DuckDB cannot tokenize."""
    try:
        toks = duckdb.tokenize(sql)
    except Exception:  # noqa: BLE001
        return None
    raw = sql.encode("utf-8", "surrogatepass")
    out = []
    for byte_pos, kind in toks:
        out.append((len(raw[:byte_pos].decode("utf-8", "surrogatepass")), str(kind).rsplit(".", 1)[-1]))
    return out


def _token_text(sql: str, toks: list[tuple[int, str]], i: int) -> str:
    end = toks[i + 1][0] if i + 1 < len(toks) else len(sql)
    return sql[toks[i][0]:end].rstrip()


def _boundaries(sql: str) -> list[int]:
    toks = _tokens(sql)
    if not toks:
        return [0, len(sql)]
    return sorted({p for p, _ in toks} | {len(sql)})


def _short(sql: str, n: int = 400) -> str:
    return repr(sql) if len(sql) <= n else repr(sql[:n]) + f"... ({len(sql)} chars)"


def _insert(sql: str, pos: int, text: str) -> str:
    return sql[:pos] + text + sql[pos:]


def _random_case(word: str, bits: int) -> str:
    return "".join(c.upper() if bits >> (i % 16) & 1 else c.lower() for i, c in enumerate(word))


def _mutate_quoting(sql: str, snapshot_id: str, served: set[str], choice: int) -> str:
    toks = _tokens(sql)
    if not toks:
        return sql
    for i in range(1, len(toks)):
        prev = _token_text(sql, toks, i - 1).lower()
        word = _token_text(sql, toks, i)
        if prev in _FROMISH and toks[i][1] == "identifier" and word.lower() in served:
            variants = (f'"{word}"', f'main."{word}"', f'"{snapshot_id}".main.{word}', f"MAIN.{word.upper()}",
                        f'"{snapshot_id}"."main"."{word.lower()}"')
            start = toks[i][0]
            return sql[:start] + variants[choice % len(variants)] + sql[start + len(word):]
    return sql


def _mutate_case(sql: str, bits: int) -> str:
    toks = _tokens(sql)
    if not toks:
        return sql
    out, last = [], 0
    for i, (pos, kind) in enumerate(toks):
        if kind == "keyword":
            word = _token_text(sql, toks, i)
            if word.isalpha():
                out += [sql[last:pos], _random_case(word, bits)]
                last = pos + len(word)
    out.append(sql[last:])
    return "".join(out)


@st.composite
def mutated(draw, seeds: tuple[list[str], list[str]], snapshot_id: str, served: set[str]):
    """(text, inserted suspicious characters at DuckDB token boundaries) after 1–4 mutations.

    Golden seeds are drawn twice as often as hostile ones (most hostile texts are refused
    whatever the mutation); a character insertion is one mutation in four.
    """
    golden, hostile = seeds
    sql = draw(st.sampled_from(golden if draw(st.integers(0, 2)) else hostile))
    suspicious = False
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["char", "comment", "comment", "quote", "quote", "case", "case",
                                   "strip_space"]))
        if op == "char":
            pos = draw(st.sampled_from(_boundaries(sql)))
            sql = _insert(sql, pos, draw(st.sampled_from(SUSPICIOUS)))
            suspicious = True
        elif op == "comment":
            pos = draw(st.sampled_from(_boundaries(sql)))
            sql = _insert(sql, pos, draw(st.sampled_from(BENIGN_SEPARATORS)))
        elif op == "quote":
            sql = _mutate_quoting(sql, snapshot_id, served, draw(st.integers(0, 9)))
        elif op == "case":
            sql = _mutate_case(sql, draw(st.integers(0, 2**16 - 1)))
        else:  # a space DuckDB would strip, replacing an ordinary one
            spaces = [m.start() for m in re.finditer(" ", sql)]
            bounds = set(_boundaries(sql))
            spaces = [p for p in spaces if p in bounds or p + 1 in bounds]
            if spaces:
                p = draw(st.sampled_from(spaces))
                sql = sql[:p] + draw(st.sampled_from(SEPARATOR_CHARS_DUCKDB_STRIPS)) + sql[p + 1:]
                suspicious = True
    return sql, suspicious


# --------------------------------------------------------------------------- the property


def test_differential_fuzz(seeds, statement_filter, explain_con, serving_snapshot, served):
    allowlist = statement_filter.tables
    stats = {"examples": 0, "allowed": 0, "explained": 0, "refused_suspicious": 0}

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=not FUZZ_RANDOM, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated(seeds, serving_snapshot.snapshot_id, served))
    def prop(case):
        sql, suspicious = case
        stats["examples"] += 1
        verdict = statement_filter.check(sql)
        if suspicious:  # (a) a suspicious character at a DuckDB token boundary: refused before parsing
            assert not verdict.allowed, f"allowed with a suspicious character: {_short(sql)}"
            assert verdict.reason in {"suspicious_character", "control_character", "parse_error",
                                      "too_large"}, (verdict.reason, _short(sql))
            stats["refused_suspicious"] += 1
        if any(is_suspicious(c) for c in sql) and verdict.allowed:
            # only possible inside a string literal: DuckDB must agree it is data
            toks = _tokens(sql)
            assert toks is not None, sql
        if not verdict.allowed:
            return
        stats["allowed"] += 1
        if _BIG_NUMBER.search(sql):
            return  # EXPLAIN constant-folds: never plan a bomb in the test process
        bound = duckdb_binds(explain_con, sql)
        if bound is None:
            return  # DuckDB cannot plan it (binder error after a mutation): nothing is read
        stats["explained"] += 1
        tables, functions = bound
        assert not functions, f"DuckDB binds table function(s) {functions} the filter allowed: {_short(sql)}"
        assert set(verdict.tables) == tables, (f"filter reports {sorted(verdict.tables)}, DuckDB binds "
                                               f"{sorted(tables)}: {_short(sql)}")
        assert tables <= allowlist, f"DuckDB reads {sorted(tables - allowlist)} off the allowlist: {_short(sql)}"

    prop()
    print("differential fuzz:", stats)
    assert stats["examples"] >= min(150, FUZZ_EXAMPLES)
    assert stats["explained"] >= 20 and stats["refused_suspicious"] >= 20, stats


def test_golden_seeds_agree_with_duckdb_unmutated(statement_filter, explain_con):
    """Every golden reference: allowed, and the filter's tables are exactly DuckDB's."""
    for sql in _golden_seeds():
        v = statement_filter.check(sql)
        assert v.allowed, (v.reason, sql)
        bound = duckdb_binds(explain_con, sql)
        assert bound is not None, sql
        tables, functions = bound
        assert not functions and set(v.tables) == tables, (sorted(v.tables), sorted(tables), sql)


# --------------------------------------------------------------------------- regressions

REGRESSIONS = [
    # DuckDB strips these as spaces; sqlglot kept them in an alias: the old filter allowed the
    # read of pg_settings / duckdb_tables / sqlite_master as a read of fct_orders
    pytest.param("SELECT * FROM fct_orders t\u200bCROSS\u200bJOIN\u200bpg_settings", id="zwsp-hidden-join"),
    pytest.param("SELECT * FROM fct_orders t\ufeffCROSS\ufeffJOIN\ufeffduckdb_tables", id="bom-hidden-join"),
    pytest.param("SELECT * FROM fct_orders t\u2060CROSS\u2060JOIN\u2060sqlite_master", id="wj-hidden-join"),
    pytest.param("SELECT *\u200b FROM duckdb_settings()", id="zwsp-before-from"),
    pytest.param("SELECT count(*) AS n\u200bFROM duckdb_settings()", id="zwsp-as-separator"),
    pytest.param("SELECT count(*) FROM fct_orders -- x\u2028UNION ALL SELECT count(*) FROM duckdb_settings()",
                 id="u2028-in-line-comment"),
    pytest.param("SELECT 1 AS a /* \u2028 */ FROM duckdb_settings()", id="u2028-in-block-comment"),
    pytest.param("SELECT count(*) FROM fct_orders --\x85UNION ALL SELECT count(*) FROM pg_settings", id="nel-comment"),
    pytest.param("SELECT\x85* FROM duckdb_settings()", id="nel-separator"),
    pytest.param("SELECT * FROM\u1680duckdb_settings()", id="ogham-space"),
    pytest.param("SELECT * FROM fct_orders\u1680x", id="ogham-alias"),
    pytest.param("\ufeffSELECT * FROM duckdb_settings()", id="leading-bom"),
    pytest.param("SELECT count(*) FROM fct_orders\ufeff", id="trailing-bom"),
    pytest.param('SELECT count(*) FROM "fct_orders\u00a0"', id="nbsp-in-quoted-identifier"),
]


@pytest.mark.parametrize("sql", REGRESSIONS)
def test_regression_differentials_are_refused_at_the_filter(sql, statement_filter):
    v = statement_filter.check(sql)
    assert not v.allowed and v.reason == "suspicious_character", (v.reason, sql)
    assert v.layer == "filter" and v.detail["codepoint"]


def test_the_zwsp_join_was_a_real_differential(statement_filter, explain_con):
    """Without the character scan sqlglot reads one table; DuckDB binds two (pg_settings too)."""
    sql = "SELECT * FROM fct_orders t\u200bCROSS\u200bJOIN\u200bpg_settings"
    try:
        old_tables, _ = statement_filter._check(sql)  # the parser-only path the scan now precedes
    except Refusal:
        pytest.skip("the parser-only path refuses it now (the allowlist work may have landed)")
    bound = duckdb_binds(explain_con, sql)
    assert bound is not None
    tables, functions = bound
    assert old_tables == {"fct_orders"} and tables == {"fct_orders"}
    assert "duckdb_settings" in functions  # pg_settings is a view over duckdb_settings()
