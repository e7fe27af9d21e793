"""The character scan (layer 0 of the statement filter): exotic characters outside literals are refused."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.guard import characters
from sqleval_pipeline.guard.characters import is_suspicious, scan
from sqleval_pipeline.guard.statement_filter import StatementFilter
from tests.conftest import cpu_time_of, demo_policy


def _bmp(categories: set[str], exclude: str = "") -> list[str]:
    return [chr(cp) for cp in range(0x10000)
            if unicodedata.category(chr(cp)) in categories and chr(cp) not in exclude]


#: every BMP code point of the refused non-control categories (a few dozen)
FORMAT_AND_SEPARATORS = _bmp({"Cf", "Zl", "Zp"}) + _bmp({"Zs"}, exclude=" ")
C1_AND_C0 = [c for c in _bmp({"Cc"}) if c not in "\t\n\r"]
GOLDEN = [c for c in load_golden(location.EVALS_DIR / "golden").cases if c.reference_sql]


def _ids(chars):
    return [f"U+{ord(c):04X}" for c in chars]


@pytest.fixture(scope="module")
def sf():
    return StatementFilter(demo_policy(), database_names={"snap-test"})


def test_the_categories_are_what_the_brief_lists():
    assert 30 <= len(FORMAT_AND_SEPARATORS) <= 120
    for cp in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x2028, 0x2029, 0x00A0, 0x1680, 0x202F,
               0x205F, 0x3000, *range(0x2000, 0x200B), 0x202E, 0x2066):
        assert chr(cp) in FORMAT_AND_SEPARATORS, hex(cp)
    assert "\x85" in C1_AND_C0 and "\x00" in C1_AND_C0 and "\x7f" in C1_AND_C0


@pytest.mark.parametrize("ch", FORMAT_AND_SEPARATORS, ids=_ids(FORMAT_AND_SEPARATORS))
def test_each_format_or_space_character_is_refused_in_code(ch, sf):
    sql = f"SELECT *{ch} FROM duckdb_settings()"
    v = scan(sql)
    assert v is not None and v.reason == "suspicious_character"
    assert v.codepoint == f"U+{ord(ch):04X}" and v.position == 8 and v.where == "code"
    assert v.name and v.codepoint in v.message and str(v.position) in v.message
    verdict = sf.check(sql)
    assert not verdict.allowed and verdict.reason == "suspicious_character"
    assert verdict.detail["codepoint"] == v.codepoint


@pytest.mark.parametrize("ch", FORMAT_AND_SEPARATORS, ids=_ids(FORMAT_AND_SEPARATORS))
def test_each_format_or_space_character_is_data_inside_a_string_literal(ch, sf):
    for sql in (f"SELECT 'a{ch}b' AS s", f"SELECT E'a\\'{ch}' AS s", f"SELECT $$a{ch}b$$ AS s",
                f"SELECT $t$a{ch}b$t$ AS s", f"SELECT 'it''s{ch}' AS s"):
        assert scan(sql) is None, sql
    assert sf.check(f"SELECT count(*) FROM fct_orders WHERE status = 'x{ch}y'").allowed


@pytest.mark.parametrize("ch", FORMAT_AND_SEPARATORS, ids=_ids(FORMAT_AND_SEPARATORS))
def test_each_format_or_space_character_is_refused_in_comments_and_identifiers(ch):
    assert scan(f"SELECT 1 -- a{ch}b\nFROM t").where == "comment"
    assert scan(f"SELECT 1 /* a{ch}b */ FROM t").where == "comment"
    assert scan(f"SELECT 1 /* a /* nested{ch} */ */ FROM t").where == "comment"
    assert scan(f'SELECT 1 AS "a{ch}b"').where == "identifier"


@pytest.mark.parametrize("ch", C1_AND_C0, ids=_ids(C1_AND_C0))
def test_control_characters_are_refused(ch):
    v = scan(f"SELECT 1{ch} FROM t")
    assert v is not None
    assert v.reason == ("control_character" if ch < " " or ch == "\x7f" else "suspicious_character")


def test_nel_is_refused_with_its_name(sf):
    v = sf.check("SELECT 1\x85FROM fct_orders")
    assert v.reason == "suspicious_character" and "U+0085" in v.message and "NEXT LINE" in v.message


def test_ordinary_whitespace_and_non_ascii_text_pass():
    assert scan("SELECT\t1\r\n  AS x") is None
    assert scan("SELECT 'café' AS s, \"Größe\" FROM t -- naïve comment\n/* ünïcode */") is None
    assert not any(is_suspicious(c) for c in "\t\n\r abcXYZ019éßЖ漢")


def test_e_strings_and_dollar_quotes():
    assert scan("SELECT E'\\\\' AS s, '\u00a0'") is None                 # E'\\' ends; NBSP is data
    assert scan("SELECT E'\\'\u200b' AS s") is None                       # \' is an escape in E-strings
    assert scan("SELECT 'a\\' AS s, \u200b").where == "code"              # but not in plain strings
    assert scan("SELECT fe'\u200b'") is None                              # identifier fe + plain string
    assert scan("SELECT $$ it's \u2028 $$ AS s") is None
    assert scan("SELECT $a$ $$ \u2028 $a$ AS s") is None                  # the tag must match
    assert scan("SELECT $1, \u00a0").where == "code"                     # $1 is a parameter
    assert scan("SELECT x$y$ \u00a0").where == "code"                    # $ inside an identifier
    assert scan("SELECT $\u200b$ x $\u200b$").codepoint == "U+200B"       # a tag is code


def test_nbsp_inside_a_quoted_identifier_is_refused(sf):
    v = sf.check('SELECT count(*) FROM "fct_orders\u00a0"')
    assert not v.allowed and v.reason == "suspicious_character" and v.detail["where"] == "identifier"
    assert sf.check('SELECT count(*) FROM "fct_orders"').allowed


@pytest.mark.parametrize("sql, where", [
    ("SELECT 'open", "string literal"),
    ("SELECT E'open\\'", "string literal"),
    ('SELECT "open', "quoted identifier"),
    ("SELECT $$ open", "dollar-quoted string"),
    ("SELECT $t$ open $$", "dollar-quoted string"),
    ("SELECT 1 /* open", "block comment"),
    ("SELECT 1 /* a /* b */", "block comment"),
])
def test_unterminated_literals_are_refused(sql, where, sf):
    v = scan(sql)
    assert v is not None and v.reason == "unterminated_literal" and v.where == where
    verdict = sf.check(sql)
    # the filter keeps its published code for text that does not tokenize; the scan's is in detail
    assert not verdict.allowed and verdict.reason == "parse_error"
    assert verdict.detail["scan_reason"] == "unterminated_literal"


def test_first_violation_wins_and_position_is_exact():
    sql = "SELECT 'ok\u200b', x\u00a0, y\u2028"
    v = scan(sql)
    assert v.codepoint == "U+00A0" and sql[v.position] == "\u00a0"


def test_characters_outside_the_bmp():
    assert scan("SELECT 1 AS x\U000e0001") is not None       # LANGUAGE TAG (Cf, plane 14)
    assert scan("SELECT '\U0001f600' AS s, 1 AS \"\U0001f600\"") is None  # emoji are not refused


def test_a_lone_surrogate_is_refused():
    assert scan("SELECT 1 AS x\ud800").reason == "suspicious_character"


@pytest.mark.parametrize("case", GOLDEN, ids=[c.id for c in GOLDEN])
def test_every_golden_reference_passes_the_scan(case):
    for sql in [case.reference_sql, *(case.alternative_sqls or [])]:
        assert scan(sql) is None, (case.id, scan(sql))


def test_scan_is_fast_on_a_large_statement():

    sql = "SELECT " + ", ".join(f"'v{i}' || c{i}" for i in range(1500)) + " FROM t -- end"
    found, secs = cpu_time_of(lambda: scan(sql))
    assert found is None and secs < 0.1


def test_doctests():
    import doctest

    assert doctest.testmod(characters).failed == 0
    assert sys.modules["sqleval_pipeline.guard.characters"] is characters
