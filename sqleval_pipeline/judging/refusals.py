"""Why a system declined an answerable case: its refusal reason, read against the reference.

A wrong refusal (``DEFERRED_WRONGLY``) is the system's own mistake unless the question really
admits several readings, and its reason usually names the mistake. :data:`REASONS` is the
table the rules judge reads it with: one row per kind of reason, tried in order, the first
match deciding (case-insensitive, compiled once). The patterns cover the embedded baseline's
reasons (``cannot map the question: no join path from … to …``, ``no metric, count or column
matched``, ``… has no date column for the time window``, ``'…' is not available in the served
data``) and the free-text reasons of model-backed generators.

=====================  ===========================================================
category               the reason says
=====================  ===========================================================
harness_bug            a provider or transport failure recorded as a refusal
                       ("timed out", "rate limit", "503", "overloaded"): no answer
                       was obtained, the adapter should have made it an error
ambiguous_question     the wording has several readings ("ambiguous", "which of",
                       "could mean", "unclear"), or it asks for a clarification
                       ("please clarify", "do you mean", "please specify") — the
                       only reasons that blame the case
wrong_table            no join path, no such table, a table lacks a needed column;
                       or the data is restricted ("not authorized", "personal data",
                       "confidential"): the reference reads served tables only
wrong_metric           no metric, measure or aggregate matched; a definition unknown
wrong_grain            no dimension, grouping, grain or time bucket matched
wrong_filter           a value, code or condition it could not map
(the reference)        something "is not available / not in the schema / no such
                       column": decided by what the reference uses the named thing for
(the reference)        any other reason, or none
=====================  ===========================================================

When the reason says something is missing, or nothing the table recognises, the category
comes from the reference: the part of it the named words belong to (a filter value or
column → wrong_filter, a measure column → wrong_metric, a grouping column → wrong_grain,
a table → wrong_table), else its most demanding part (a join → wrong_table, a derived
measure → wrong_metric, a coded-value filter → wrong_filter, a time bucket → wrong_grain),
else wrong_table (it found no table to answer from).

>>> reason_kind("cannot map the question: no join path from orders to 'brand'").category
'wrong_table'
>>> reason_kind("The question is ambiguous: revenue could mean gross or net").category
'ambiguous_question'
>>> reason_kind("payment method UPI is not in the schema").category is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqleval_pipeline.judging.sql_facts import Facts, is_time, words

__all__ = ["Reason", "REASONS", "UNAVAILABLE", "reason_kind", "classify_refusal"]


@dataclass(frozen=True)
class Reason:
    category: str | None  # None: decided by what the reference needs
    says: str
    pattern: str


REASONS: tuple[Reason, ...] = (
    Reason("harness_bug", "a provider or transport failure, not a decision",
           r"\btimed? ?out\b|\btimeout\b|\brate[ -]?limit|\btoo many requests\b|\b(?:http |status )?"
           r"(?:429|500|502|503|504)\b|\bservice (?:is )?unavailable\b|\binternal server error\b"
           r"|\boverloaded\b|\bconnection (?:error|reset|refused|aborted)\b|\bnetwork error\b"
           r"|\bquota exceeded\b|\bupstream (?:error|failure)\b"),
    Reason("ambiguous_question", "wording with several readings, or a request to clarify",
           r"\bclarif(?:y|ication)\b|\bplease specify\b|\bdo you mean\b|\bdid you mean\b"
           r"|\bcould you (?:specify|tell me which)\b|\bneeds? more (?:context|details)\b|"
           r"\bambiguous|\bambiguity|\bwhich of\b|\bcould (?:mean|refer to|be read)|\bunclear\b"
           r"|\bnot clear (?:which|what|whether)|\b(?:several|multiple|two|more than one) "
           r"(?:possible )?(?:readings|interpretations|meanings)\b|\bcan be (?:read|interpreted) "
           r"(?:as|in|two)\b"),
    Reason("wrong_table", "a missing join path or table",
           r"\bno (?:join )?path\b|\bcan(?:not|'t)? (?:be )?join|\bno (?:way|relationship|foreign "
           r"key|key) to join\b|\bnot joinable\b|\bno (?:such |matching |suitable )?table\b"
           r"|\btable\b[^.;]*\b(?:not found|does not exist|doesn't exist|is missing)\b"
           r"|\bunknown table\b|\bhas no [\w ]{1,30}? column\b|\bnot (?:linked|related) to\b"),
    Reason("wrong_table", "a restriction the served data does not have",
           r"\bnot (?:authori[sz]ed|permitted|allowed to (?:access|read|see|query))\b|\bpermission\b"
           r"|\b(?:personal|private|confidential|restricted|protected) (?:data|information|table)"
           r"|\bprivacy\b|\bpii\b|\baccess (?:denied|restricted)\b"),
    Reason("wrong_metric", "no metric or measure it could compute",
           r"\bno (?:metric|measure|aggregate|kpi)s?\b|\b(?:metric|measure)\b[^.;]*\b(?:not "
           r"(?:defined|found|matched|known)|unknown|undefined)\b|\bhow to (?:compute|calculate|"
           r"measure|define)\b|\bdefinition (?:of|for)\b|\b(?:is|are) not defined\b|\bno "
           r"(?:count|formula) (?:matched|for)\b|\bundefined (?:metric|measure|term)\b"),
    Reason("wrong_grain", "no dimension, grouping or time bucket",
           r"\bno (?:dimension|grain|grouping|time bucket|bucket)s?\b|\bcan(?:not|'t) (?:group|"
           r"bucket|break (?:it |this )?down)\b|\bgranularity\b|\b(?:dimension|grouping|grain|"
           r"breakdown)\b[^.;]*\b(?:not (?:found|matched|known|available)|unknown)\b"),
    Reason("wrong_filter", "a value or condition it could not map",
           r"\b(?:value|code|label|condition)s?\b[^.;]*\b(?:not (?:found|mapped|recogni[sz]ed|"
           r"known)|unknown|unmapped)\b|\bcould not (?:map|resolve|match|find) (?:the )?(?:value|"
           r"code|filter|condition|label)\b|\bno (?:matching )?(?:value|filter|code)s?\b"
           r"|\bunrecogni[sz]ed (?:value|code|term)\b|\bnot a (?:known |valid )?(?:value|code|"
           r"status)\b|\bcan(?:not|'t) filter\b"),
)
#: a claim that something the question names is not served: the reference says what it is
UNAVAILABLE = Reason(
    None, "something it says is not served",
    r"\bnot (?:available|in the (?:schema|data(?:base)?|served data|tables?)|present|served|"
    r"collected|stored|exposed)\b|\bno such column\b|\b(?:does not|doesn't) (?:exist|contain|"
    r"have|include)\b|\bno (?:\w+ ){0,2}(?:data|column|field|information|records?)\b"
    r"|\bsensitive\b|\bmissing from\b")
_COMPILED = tuple((r, re.compile(r.pattern, re.IGNORECASE)) for r in (*REASONS, UNAVAILABLE))
_QUOTED = re.compile(r"['\"‘“]([^'\"’”]{2,60})['\"’”]")
_GENERIC = words(
    "the a an is are was not no any in of for to from by on with as it its this that there cannot "
    "can could map question available served data schema table tables column columns value "
    "values field information record records exist contain have has include such per glossary "
    "sensitive collected stored exposed present missing query answer sql database model "
    "declined reason given unable find found match matched")
_LABEL = {"wrong_filter": "a filter", "wrong_metric": "the measure", "wrong_grain": "the grouping",
          "wrong_table": "a table"}


def reason_kind(reason: str) -> Reason | None:
    """The first row of the table the reason matches (None: not recognised)."""
    for row, rx in _COMPILED:
        if rx.search(reason):
            return row
    return None


def _needs(ref: Facts) -> dict[str, str]:
    """What the reference needs, by category, as text for an explanation."""
    out = {"wrong_table": f"reads {', '.join(sorted(ref.tables)) or 'no table'}"}
    if ref.filters:
        out["wrong_filter"] = f"filters {' AND '.join(ref.filters)}"
    if ref.measures:
        out["wrong_metric"] = f"computes {', '.join(sorted(ref.measures))}"
    if ref.grain:
        out["wrong_grain"] = f"groups by {', '.join(ref.grain)}"
    return out


def _named(reason: str, ref: Facts) -> str | None:
    """The part of the reference the reason's words name (filter, measure, grain, table)."""
    quoted = [q.lower() for q in _QUOTED.findall(reason)]
    terms = set().union(*(words(q) for q in quoted)) if quoted else words(reason) - _GENERIC
    if not terms:
        return None
    parts = {
        "wrong_filter": set().union(*(words(f) for f in ref.filters)) if ref.filters else set(),
        "wrong_metric": set().union(*(words(c) for c in ref.columns("measure"))),
        "wrong_grain": set().union(*(words(c) for c in ref.columns("grain"))),
        "wrong_table": set().union(*(words(t) for t in ref.tables)),
    }
    scores = {cat: len(terms & vocab) for cat, vocab in parts.items()}
    best = max(scores.values())
    return next(cat for cat in parts if scores[cat] == best) if best else None


def _demanding(ref: Facts) -> str:
    """The reference's most demanding part, for a reason that says nothing recognisable."""
    if len(ref.tables) > 1:
        return "wrong_table"
    if any(re.search(r"\)\s*[-+*/]|\bfilter\s*\(|\bcase\b|\bdistinct\b", m, re.I) for m in ref.measures):
        return "wrong_metric"
    if any(re.search(r"(?:=|\bin)\s*\(?'", f, re.I) and not is_time(f) for f in ref.filters):
        return "wrong_filter"
    if any(is_time(g) for g in ref.grain):
        return "wrong_grain"
    return "wrong_table"


def classify_refusal(reason: str | None, ref: Facts | None) -> tuple[str, str]:
    """``(category, explanation)`` for a declined answerable case."""
    text = (reason or "").strip() or "no reason given"
    row = reason_kind(text)
    needs = _needs(ref) if ref is not None else {}
    if row is not None and row.category is not None:
        category, why = row.category, f"the reason names {row.says}"
    else:
        named = _named(text, ref) if ref is not None else None
        if named:
            category, why = named, f"it says {_LABEL[named]} of the reference is not served"
        elif row is not None:
            category, why = "wrong_table", "it says the data is not served"
        else:
            category = _demanding(ref) if ref is not None else "wrong_table"
            why = "a reason the judge does not recognise, judged by what the reference needs"
    if category == "harness_bug":
        return category, (f"no answer was obtained: the refusal reason is a provider or transport "
                          f"failure (\"{text}\"), not the system declining; the adapter should record "
                          "it as an error (ERROR, outside the denominator) and the run retry it")
    if category == "ambiguous_question":
        return category, (f"declined an answerable question as ambiguous or asked to clarify "
                          f"(\"{text}\"); fix the question, or accept its readings in the case")
    need = needs.get(category) or needs.get("wrong_table")
    tail = f"; the reference {need}" if need else ""
    return category, f"declined an answerable question: {why} (\"{text}\"){tail}"
