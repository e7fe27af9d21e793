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
#: the next position where code stops being plain printable ASCII: a comment or literal
#: opening, a quote, or a character outside tab/LF/CR and U+0020–U+007E
_EVENT = re.compile(r"--|/\*|[eE]'|['\"$]|[^\t\n\r\x20-\x7e]")
#: inside a comment or identifier: the next character that may be refused
_NOT_PLAIN = re.compile(r"[^\t\n\r\x20-\x7e]")
#: inside a block comment: the next nesting change or character that may be refused
_COMMENT_EVENT = re.compile(r"/\*|\*/|[^\t\n\r\x20-\x7e]")
#: inside an E-string: the next escape, doubled quote or closing quote
_ESTRING_EVENT = re.compile(r"\\.|''|'", re.DOTALL)


def _check_span(sql: str, start: int, end: int, where: str) -> CharViolation | None:
    pos = start
    while (m := _NOT_PLAIN.search(sql, pos, end)) is not None:
        ch = m.group()
        if is_suspicious(ch):
            return _violation(ch, m.start(), where)
        pos = m.end()
    return None


def scan(sql: str) -> CharViolation | None:
    """The first reason ``sql`` must be refused at the character level, or None (see module doc).

    One pass, linear in the text: each step searches forward from where the previous one
    ended (a text of 1 MB of comments or quotes is scanned in milliseconds)."""
    n = len(sql)
    i = 0
    while i < n:
        m = _EVENT.search(sql, i)
        if m is None:
            return None
        i = m.start()
        tok = m.group()
        if tok == "--":
            nl = _LINE_END.search(sql, i + 2)
            end = nl.start() if nl else n
            bad = _check_span(sql, i, end, "comment")
            if bad:
                return bad
            i = end
        elif tok == "/*":
            end, bad = _block_comment(sql, i)
            if bad:
                return bad
            i = end
        elif tok in ("e'", "E'"):
            if i > 0 and _IDENT_CHAR.match(sql[i - 1]):
                i += 1  # an 'e' ending an identifier: the quote opens an ordinary string
                continue
            end = _estring_end(sql, i + 2)
            if end is None:
                return CharViolation(UNTERMINATED, i, "string literal")
            i = end
        elif tok == "'":
            end = _quoted_end(sql, i + 1, "'")
            if end is None:
                return CharViolation(UNTERMINATED, i, "string literal")
            i = end
        elif tok == '"':
            end = _quoted_end(sql, i + 1, '"')
            if end is None:
                return CharViolation(UNTERMINATED, i, "quoted identifier")
            bad = _check_span(sql, i + 1, end - 1, "identifier")
            if bad:
                return bad
            i = end
        elif tok == "$":
            dm = None if i > 0 and _IDENT_CHAR.match(sql[i - 1]) else _DOLLAR_TAG.match(sql, i)
            if dm is None:
                i += 1  # a parameter ($1) or part of an identifier
                continue
            tag = dm.group(0)
            bad = _check_span(sql, i, dm.end(), "code")  # the tag itself is code
            if bad:
                return bad
            close = sql.find(tag, dm.end())
            if close < 0:
                return CharViolation(UNTERMINATED, i, "dollar-quoted string")
            i = close + len(tag)
        else:
            if is_suspicious(tok):
                return _violation(tok, i, "code")
            i += 1
    return None


_LINE_END = re.compile(r"[\n\r]")


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
    while (m := _ESTRING_EVENT.search(sql, i)) is not None:
        if m.group() == "'":
            return m.end()
        i = m.end()  # a backslash escape or a doubled quote
    return None


def _block_comment(sql: str, start: int) -> tuple[int, CharViolation | None]:
    """End of the (nested) block comment opening at ``start``; its characters are scanned."""
    depth = 0
    i = start
    while (m := _COMMENT_EVENT.search(sql, i)) is not None:
        tok = m.group()
        i = m.end()
        if tok == "/*":
            depth += 1
        elif tok == "*/":
            depth -= 1
            if depth == 0:
                return i, None
        elif is_suspicious(tok):
            return m.start(), _violation(tok, m.start(), "comment")
    return len(sql), CharViolation(UNTERMINATED, start, "block comment")


__all__ = ["CONTROL", "CharViolation", "SUSPICIOUS", "UNTERMINATED", "is_suspicious", "scan"]
