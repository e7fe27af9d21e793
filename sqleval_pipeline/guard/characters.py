"""Layer 0 of the statement filter: refuse invisible and exotic characters before any parser runs.

sqlglot and DuckDB do not agree on what counts as whitespace. sqlglot separates tokens on
what Python calls whitespace (NBSP, U+2028, U+0085, U+3000 ...) and keeps every other character
inside an identifier; DuckDB (2.0) replaces its own list of Unicode spaces by ASCII spaces
before lexing — a list that includes ZWSP U+200B, BOM U+FEFF and WORD JOINER U+2060, which
sqlglot keeps in identifiers. So ``FROM fct_orders t<ZWSP>CROSS<ZWSP>JOIN<ZWSP>pg_settings``
is one table with a long alias for sqlglot and a cross join with ``pg_settings`` for DuckDB
(observed; ``tests/guard/test_differential.py``). Any such disagreement lets the text the filter
checked differ from the statement DuckDB runs. :func:`scan` therefore refuses, **outside string
literals**, every character of:

=========================  ===============================================================
Unicode category           examples
=========================  ===============================================================
``Cf`` (format)            ZWSP U+200B, ZWNJ U+200C, ZWJ U+200D, word joiner U+2060,
                           BOM U+FEFF, soft hyphen U+00AD, bidi controls U+202A–U+202E,
                           U+2066–U+2069, U+061C, U+200E/U+200F ...
``Zl`` / ``Zp``            line separator U+2028, paragraph separator U+2029
``Zs`` except U+0020       NBSP U+00A0, U+1680, U+2000–U+200A, U+202F, U+205F, U+3000
``Cc`` except tab/LF/CR    NUL, other C0 controls, DEL, the C1 block including NEL U+0085
``Cs`` (surrogates)        a lone surrogate (cannot reach DuckDB as UTF-8 unchanged)
=========================  ===============================================================

"Outside string literals" is decided by a light tokenizer that follows DuckDB's lexer:

* ``'...'`` with ``''`` as the only escape (a backslash is an ordinary character);
* ``E'...'`` / ``e'...'`` (the ``E`` starting a token) with backslash escapes (``\\'``) and ``''``;
* dollar-quoted strings ``$$...$$`` and ``$tag$...$tag$`` (``$1`` is a parameter, not a quote);
* ``"..."`` quoted identifiers (``""`` escape) — *scanned*: identifiers must be plain;
* ``--`` line comments (to LF or CR) and ``/* ... */`` block comments, nested as in DuckDB
  — *scanned*: the two parsers disagree on where a comment ends with exotic newlines.

The contents of string literals are data and may hold any character (the statement filter
still refuses NUL and control characters anywhere). A literal, quoted identifier or block
comment left open is refused (``unterminated_literal``): the parsers' recoveries differ.

>>> scan("SELECT count(*) FROM fct_orders") is None
True
>>> v = scan("SELECT *\\u200b FROM duckdb_settings()")
>>> v.reason, v.codepoint, v.name, v.position
('suspicious_character', 'U+200B', 'ZERO WIDTH SPACE', 8)
>>> v.message[:62]
'The statement contains U+200B ZERO WIDTH SPACE at position 8 ('
>>> scan("SELECT 'caf\\u00e9\\u00a0\\u200b' AS s") is None      # inside a string literal: data
True
>>> scan("SELECT E'it\\\\'s\\u00a0' AS s") is None              # E-string with a backslash escape
True
>>> scan("SELECT $q$a\\u2028b$q$ AS s") is None                # dollar-quoted
True
>>> scan('SELECT 1 AS "a\\u00a0b"').where                       # quoted identifiers are scanned
'identifier'
>>> scan("SELECT 1 -- note\\u2028FROM x").where                  # comments are scanned
'comment'
>>> scan("SELECT 1\\x0c").reason                               # ASCII controls keep their old code
'control_character'
>>> scan("SELECT 'open").reason
'unterminated_literal'
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

SUSPICIOUS = "suspicious_character"
UNTERMINATED = "unterminated_literal"
#: ASCII control characters keep the statement filter's older reason code
CONTROL = "control_character"

#: Characters always allowed outside literals even though their category is refused.
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_REFUSED_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cc", "Cs"})


@lru_cache(maxsize=4096)
def is_suspicious(ch: str) -> bool:
    """True when ``ch`` may not appear outside a string literal.

    >>> [is_suspicious(c) for c in (" ", "\\t", "a", "\\u00e9", "\\u00a0", "\\u200b", "\\u0085", "\\u2028")]
    [False, False, False, False, True, True, True, True]
    """
    if ch < "\x7f":  # fast path: printable ASCII, tab, LF, CR allowed; other C0 controls not
        return ch < " " and ch not in _ALLOWED_CONTROLS
    cat = unicodedata.category(ch)
    if cat == "Zs":
        return ch != " "
    return cat in _REFUSED_CATEGORIES


@dataclass(frozen=True)
class CharViolation:
    """Why :func:`scan` refused a text.

    ``reason`` is ``suspicious_character``, ``control_character`` (an ASCII control
    character: C0 other than tab/LF/CR, or DEL — the filter's older code) or
    ``unterminated_literal``; ``position`` is the
    0-based index in the text (of the character, or of the opening of the unterminated
    literal); ``where`` is ``code``, ``identifier`` or ``comment`` (or the literal kind for
    an unterminated one); ``codepoint``/``name`` describe the character (None for
    ``unterminated_literal``).
    """

    reason: str
    position: int
    where: str
    codepoint: str | None = None
    name: str | None = None

    @property
    def message(self) -> str:
        if self.reason == CONTROL:
            return (f"The statement contains the control character {self.codepoint} {self.name} at "
                    f"position {self.position} (in {self.where}).")
        if self.reason == UNTERMINATED:
            return (f"The statement has an unterminated {self.where} starting at position {self.position}; "
                    "it is refused because parsers recover from it differently.")
        return (f"The statement contains {self.codepoint} {self.name} at position {self.position} "
                f"(in {self.where}); invisible, format and non-ASCII space characters are allowed only "
                "inside string literals.")

    @property
    def filter_reason(self) -> str:
        """The statement filter's reason code: an unterminated literal keeps the filter's
        ``parse_error`` (its published reason for text that does not tokenize)."""
        return "parse_error" if self.reason == UNTERMINATED else self.reason

    def as_detail(self) -> dict:
        return {"scan_reason": self.reason, "position": self.position, "where": self.where, "codepoint": self.codepoint,
                "char_name": self.name}


def _char_name(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if name:
        return name
    cp = ord(ch)
    controls = {0x85: "NEXT LINE (NEL)", 0x00: "NULL", 0x7F: "DELETE"}
    if cp in controls:
        return controls[cp]
    return f"<{unicodedata.category(ch)} control>" if unicodedata.category(ch) == "Cc" else \
        f"<unnamed {unicodedata.category(ch)}>"


def _violation(ch: str, pos: int, where: str) -> CharViolation:
    reason = CONTROL if ch < " " or ch == "\x7f" else SUSPICIOUS
    return CharViolation(reason, pos, where, f"U+{ord(ch):04X}", _char_name(ch))


_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\U0010ffff]")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)?\$")
#: everything that is not the start of a literal/comment and not a suspicious candidate
_PLAIN = re.compile(r"[\t\n\r -!#%&(-,.-~]+")


def _check_span(sql: str, start: int, end: int, where: str) -> CharViolation | None:
    for i in range(start, end):
        ch = sql[i]
        if ch >= "\x7f" or ch < " ":
            if is_suspicious(ch):
                return _violation(ch, i, where)
    return None


def scan(sql: str) -> CharViolation | None:
    """The first reason ``sql`` must be refused at the character level, or None (see module doc)."""
    n = len(sql)
    i = 0
    while i < n:
        m = _PLAIN.match(sql, i)
        if m:
            # '-', '/', 'e'/'E' are in _PLAIN: look for comment / E-string openings inside the run
            run_end = m.end()
            j = _first_opening(sql, i, run_end)
            if j is None:
                i = run_end
                continue
            i = j
        ch = sql[i]
        if ch == "-" and sql.startswith("--", i):
            end = i + 2
            while end < n and sql[end] not in "\n\r":
                end += 1
            bad = _check_span(sql, i, end, "comment")
            if bad:
                return bad
            i = end
        elif ch == "/" and sql.startswith("/*", i):
            end, bad = _block_comment(sql, i)
            if bad:
                return bad
            i = end
        elif ch in "eE" and i + 1 < n and sql[i + 1] == "'" and not (i > 0 and _IDENT_CHAR.match(sql[i - 1])):
            end = _estring_end(sql, i + 2)
            if end is None:
                return CharViolation(UNTERMINATED, i, "string literal")
            i = end
        elif ch == "'":
            end = _quoted_end(sql, i + 1, "'")
            if end is None:
                return CharViolation(UNTERMINATED, i, "string literal")
            i = end
        elif ch == '"':
            end = _quoted_end(sql, i + 1, '"')
            if end is None:
                return CharViolation(UNTERMINATED, i, "quoted identifier")
            bad = _check_span(sql, i + 1, end - 1, "identifier")
            if bad:
                return bad
            i = end
        elif ch == "$" and not (i > 0 and _IDENT_CHAR.match(sql[i - 1])) and (dm := _DOLLAR_TAG.match(sql, i)):
            tag = dm.group(0)
            bad = _check_span(sql, i, dm.end(), "code")  # the tag itself is code
            if bad:
                return bad
            close = sql.find(tag, dm.end())
            if close < 0:
                return CharViolation(UNTERMINATED, i, "dollar-quoted string")
            i = close + len(tag)
        else:
            if is_suspicious(ch):
                return _violation(ch, i, "code")
            i += 1
    return None


def _first_opening(sql: str, start: int, end: int) -> int | None:
    """Index of the first comment / E-string opening in the plain run ``sql[start:end]``."""
    best = None
    for pat in ("--", "/*", "e'", "E'"):
        k = sql.find(pat, start, end + 1)
        while k >= 0 and pat[0] in "eE" and k > 0 and _IDENT_CHAR.match(sql[k - 1]):
            k = sql.find(pat, k + 1, end + 1)  # an 'e' ending an identifier does not open an E-string
        if k >= 0 and (best is None or k < best):
            best = k
    return best


def _quoted_end(sql: str, i: int, q: str) -> int | None:
    """Index after the closing quote ``q`` (doubled quotes are escapes), or None."""
    n = len(sql)
    while True:
        k = sql.find(q, i)
        if k < 0:
            return None
        if k + 1 < n and sql[k + 1] == q:
            i = k + 2
            continue
        return k + 1


def _estring_end(sql: str, i: int) -> int | None:
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'":
            if i + 1 < n and sql[i + 1] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return None


def _block_comment(sql: str, start: int) -> tuple[int, CharViolation | None]:
    """End of the (nested) block comment opening at ``start``; its characters are scanned."""
    n = len(sql)
    depth = 0
    i = start
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
            continue
        if sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i, None
            continue
        if is_suspicious(sql[i]):
            return i, _violation(sql[i], i, "comment")
        i += 1
    return n, CharViolation(UNTERMINATED, start, "block comment")


__all__ = ["CONTROL", "CharViolation", "SUSPICIOUS", "UNTERMINATED", "is_suspicious", "scan"]
