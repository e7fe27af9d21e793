"""Bounded parent-side work (issue 21, class 2): the statement filter's cost does not depend on
how a text is shaped.

``SELECT * FROM range(1e999999)`` once stalled the harness 36-90 s (the series size check
built a million-digit integer); 6,600 chained ``[1]`` subscripts cost sqlglot 72 s; the
character scan was quadratic in the number of comments. Literal sizes are now judged on their
text before any arithmetic, shapes whose parse cost grows are bounded on the token stream,
every step runs under a time budget (``filter_budget_exceeded``), and a seeded fuzz of
adversarial literals and shapes checks that every decision is quick.

What these tests time is the work of this thread (``tests.conftest.cpu_time_of``: its CPU time,
the garbage collector paused), not the wall clock: on a loaded machine (CI's two cores run two test workers, their sandboxes and
subprocesses) the wall clock also counts other processes' turns on the core, which is no cost
of the filter, and made a decision of 0.25 s of budget take 0.507 s there. The filter's own
budget counts its thread's CPU time too (guard/budget.py), with a wall-clock ceiling ten times
longer: a check of 2 ms was once refused on the wall clock because its process waited a second
for a core.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.guard.bounds import MAX_CHAINED_CALLS, MAX_DEPTH, MAX_LAMBDA_DEPTH
from sqleval_pipeline.guard.budget import BUDGET_REASON, FILTER_BUDGET_S, WALL_FACTOR, Budget, BudgetExceeded
from sqleval_pipeline.guard.characters import scan
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.guard.statement_filter import StatementFilter
from tests.conftest import cpu_time_of, demo_policy

#: each decision of the fuzz must take less than this (the filter runs with half of it as budget)
DECISION_BOUND_S = 0.5
SIZE = 19_900  # just under the default max_sql_bytes (20,000)


@pytest.fixture(scope="module")
def sf():
    return StatementFilter(demo_policy(), database_names={"snap-test"})


def _timed(sf: StatementFilter, sql: str):
    """The filter's decision on ``sql`` and the CPU time this process spent on it (module doc)."""
    return cpu_time_of(lambda: sf.check(sql))


def _least(make_filter, sql: str, first: float, bound: float, tries: int = 3) -> float:
    """The least of up to ``tries`` measurements of one decision, each on a filter of its own
    (a filter caches its decisions), taken again only while over ``bound``. A slow path is
    slow every time; a machine busy with other work (CI's two cores run two test workers, their
    sandboxes and subprocesses, which also slow this process's own CPU) is not: one decision of
    the fuzz once measured 0.506 s of CPU there and 0.26 s at most on this machine under four
    busy loops."""
    least = first
    for _ in range(tries - 1):
        if least < bound:
            break
        least = min(least, _timed(make_filter(), sql)[1])
    return least


# ----------------------------------------------------------------------------- the cases

@pytest.mark.parametrize("sql", [
    "SELECT * FROM range(1e999999)",                        # the reported stall (36-90 s)
    "SELECT * FROM range(1e99999)",                         # the 'smaller variants' (0.4-5 s)
    "SELECT * FROM generate_series(1, 1e99999)",
    "SELECT * FROM range(-1e999999, 0)",
    "SELECT * FROM range(0, 10, 1e-99999)",                 # a tiny step: a huge count
    "SELECT * FROM range(" + "9" * 15000 + ")",             # a 15,000-digit integer
    "SELECT * FROM range(0, 10, 0." + "0" * 15000 + "1)",
    "SELECT * FROM range(1e" + "9" * 15000 + ")",           # an exponent of 15,000 digits
    "SELECT count(*) FROM fct_orders WHERE net_revenue_inr < 1e999999",   # any position, not only series
])
def test_huge_numeric_literals_are_refused_on_their_text(sf, sql):
    v, secs = _timed(sf, sql)
    assert (v.allowed, v.reason) == (False, "literal_too_large"), v.message
    assert secs < 0.5, f"{secs:.2f} s"
    assert "numeric literal" in v.message


def test_a_tiny_interval_step_is_too_large_to_size(sf):
    v = sf.check("SELECT * FROM range(TIMESTAMP '2025-01-01', TIMESTAMP '2025-01-02', "
                 "INTERVAL '1e-300 second')")
    assert v.reason == "series_too_large" and "too large to size" in v.message


def test_sizeable_bounds_are_still_sized_exactly(sf):
    assert sf.check("SELECT * FROM range(1000000)").allowed
    v = sf.check("SELECT * FROM range(1000001)")
    assert v.reason == "series_too_large" and "1,000,001 rows" in v.message
    assert sf.check("SELECT * FROM range(1e300)").reason == "series_too_large"


# ----------------------------------------------------------------------------- shapes

def test_a_chain_of_subscripts_is_parsed_in_linear_time():
    """The proof is the CPU time (0.1 s here; 72 s before). A filter with a budget of 10 s
    decides here, so the verdict is the analysis's whatever the garbage collector does."""
    roomy = StatementFilter(demo_policy(), database_names={"snap-test"}, budget_s=10.0)
    v, secs = _timed(roomy, "SELECT [1]" + "[1]" * ((SIZE - 10) // 3))
    assert v.allowed, v.message
    assert secs < 1.0, f"{secs:.2f} s"


@pytest.mark.parametrize("sql, reason", [
    ("SELECT 'x'" + ".upper()" * (MAX_CHAINED_CALLS + 2), "too_complex"),  # the first is on a literal
    ("SELECT (" + "1+" * 6000 + "1)" + ".abs()" * 40, "too_complex"),     # 45 ms per call before
    ("SELECT " + "list_transform([1], x -> " * (MAX_LAMBDA_DEPTH + 1) + "x" + ")" * (MAX_LAMBDA_DEPTH + 1),
     "too_complex"),
    ("SELECT " + "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1), "too_deep"),
    ("SELECT " + "[" * 3000 + "1" + "]" * 3000, "too_deep"),
])
def test_shapes_whose_parse_cost_grows_are_refused_before_parsing(sql, reason, monkeypatch):
    """Refused on the token list: the parser is never called (a machine-independent proof that
    the cost of parsing is never paid; the filter's time is measured in bench_guard.py)."""
    from sqleval_pipeline.guard import statement_filter
    from sqleval_pipeline.guard.bounds import GUARD_DIALECT

    class NoParser:
        def tokenize(self, text):
            return GUARD_DIALECT.tokenize(text)

        def parser(self, *a, **kw):
            raise AssertionError("the parser was called")

    monkeypatch.setattr(statement_filter, "GUARD_DIALECT", NoParser())
    # a roomy budget: what is proved is the bound on the tokens, not the budget
    v = StatementFilter(demo_policy(), database_names={"snap-test"}, budget_s=10.0).check(sql)
    assert v.reason == reason, v.message


def test_the_bounds_leave_ordinary_shapes_alone(sf):
    ok = [
        "SELECT " + "(" * 20 + "count(*)" + ")" * 20 + " FROM fct_orders",
        "SELECT list_transform([1, 2], x -> list_transform([x], y -> y + 1)) AS l",
        "SELECT lower(status).trim().upper() AS s FROM fct_orders",
        "SELECT 1.5e3, 123456789012345678901234567890 AS big, .5e-3 AS small",
    ]
    for sql in ok:
        v = sf.check(sql)
        assert v.allowed, (sql, v.reason, v.message)


def test_the_character_scan_is_linear():
    """1 MB of comments, quotes and identifiers: the scan searches forward from where it
    stopped (it re-scanned the rest of the text after every comment: quadratic)."""
    for sql in ("SELECT 1 " + "/*x*/ " * 150_000, "SELECT " + "'a'," * 200_000 + "1",
                "SELECT 1" + "--x\n" * 200_000, "SELECT " + '"a",' * 200_000 + "1"):
        found, secs = cpu_time_of(lambda: scan(sql))
        assert found is None and secs < 2.0, sql[:20]


# ----------------------------------------------------------------------------- the time budget

def test_a_statement_over_the_budget_is_refused_with_its_own_reason():
    tight = StatementFilter(demo_policy(), budget_s=0.005)
    sql = "SELECT 1 AS x FROM fct_orders WHERE order_id IN (" + ",".join(str(i) for i in range(3000)) + ")"
    v, secs = _timed(tight, sql)
    assert (v.allowed, v.reason, v.layer) == (False, BUDGET_REASON, "filter"), v.message
    assert v.detail["step"] and v.detail["budget_ms"] == 5.0 and "time budget" in v.message
    assert secs < 0.5
    # the full budget decides the same text: it is allowed
    assert StatementFilter(demo_policy()).check(sql).allowed


def test_the_budget_counts_work_not_waiting():
    """A thread that waits (its process descheduled on a busy machine, here a sleep) spends no
    budget; the wall clock still has a ceiling of WALL_FACTOR budgets; work spends it."""
    waiting = Budget(0.05)
    time.sleep(0.1)  # twice the budget on the wall clock, a fifth of its ceiling
    assert not waiting.expired and waiting.remaining() > 0.03
    waiting.check("tokens")  # does not raise

    starved = Budget(0.01)
    time.sleep(0.01 * WALL_FACTOR + 0.05)
    assert starved.expired
    with pytest.raises(BudgetExceeded) as e:
        starved.check("parse")
    detail = e.value.as_detail()
    assert detail["step"] == "parse" and detail["wall_ms"] >= 150 and detail["elapsed_ms"] < 100
    assert detail["ran_out"] == "wall clock"

    working = Budget(0.02)
    while time.thread_time() - working.cpu_start < 0.03:
        pass
    assert working.expired and working.remaining() == 0.0
    assert working.exceeded("walk").elapsed_s >= 0.02
    assert working.exceeded("walk").as_detail()["ran_out"] == "cpu"


def test_a_refusal_of_the_wall_clock_ceiling_is_not_cached(monkeypatch):
    """A starved process (here: a ceiling of a nanosecond) refuses on the wall clock; the
    verdict depends on the load, so the same text is decided again, and allowed, once the
    process gets its turns."""
    from sqleval_pipeline.guard import budget

    sf = StatementFilter(demo_policy())
    sql = "SELECT count(*) AS n FROM fct_orders"
    monkeypatch.setattr(budget, "WALL_FACTOR", 1e-9)
    v = sf.check(sql)
    assert v.reason == BUDGET_REASON and v.detail["ran_out"] == "wall clock", v.message
    monkeypatch.undo()
    assert sf.check(sql).allowed


def test_a_refusal_under_a_lowered_budget_is_not_cached():
    sf = StatementFilter(demo_policy())
    sql = "SELECT 1 AS y FROM fct_orders WHERE order_id IN (" + ",".join(str(i) for i in range(3000)) + ")"
    assert sf.check(sql, budget_s=0.001).reason == BUDGET_REASON
    assert sf.check(sql).allowed


def test_the_budget_never_exceeds_the_statement_timeout():
    assert StatementFilter(demo_policy()).budget_s == FILTER_BUDGET_S
    short = demo_policy(overrides={"limits": {"statement_timeout_s": 0.25}})
    assert StatementFilter(short).budget_s == 0.25
    assert StatementFilter(short, budget_s=5).budget_s == 0.25


def test_the_executor_spends_at_most_the_call_timeout_before_a_worker(guard):
    """A call's timeout caps the parent's budget too: a text that takes longer to check is
    refused by the filter, not waited for."""
    sql = ("SELECT count(*) AS n FROM fct_orders WHERE order_id IN ("
           + ",".join(str(i) for i in range(2000, 5000)) + ")")
    r = guard.execute(sql, timeout_s=0.001)
    assert (r.status, r.layer, r.reason) == ("refused", "filter", BUDGET_REASON), r.describe()
    assert guard.execute(sql).ok  # the same text with the full budget: not poisoned by the refusal


# ----------------------------------------------------------------------------- pinned clock shortcut

CLOCK_SPELLINGS = [
    "SELECT now()", "SELECT current_date", "SELECT CURRENT_TIMESTAMP", "SELECT localtime",
    'SELECT "now"()', "SELECT main.now()", "SELECT system.main.current_date()", "SELECT today() - 1",
    "SELECT get_current_timestamp()", "SELECT transaction_timestamp()", "SELECT current_localtimestamp()",
    "SELECT LOCALTIMESTAMP", "SELECT current_time", 'SELECT "current_timestamp"', "SELECT 'now()' AS s",
]


def test_texts_the_clock_rewrite_would_change_are_always_marked(sf):
    """The executor skips pin_clock only for texts with no token spelled like a clock call; a
    text pin_clock changes must never be one of them."""
    texts = list(CLOCK_SPELLINGS)
    texts += [c.reference_sql for c in load_golden(location.GOLDEN_DIR).cases if c.reference_sql]
    cases = Path(__file__).parent / "filter_cases.jsonl"
    texts += [json.loads(line)["sql"] for line in cases.read_text().splitlines() if line.strip()]
    changed = 0
    for sql in texts:
        v = sf.check(sql)
        try:
            pinned = pin_clock(sql, dt.date(2025, 12, 15))
        except Exception:  # noqa: BLE001 - untokenizable: refused anyway
            continue
        if pinned != sql:
            changed += 1
            assert v.clock_tokens, sql
    assert changed >= 12


# ----------------------------------------------------------------------------- the fuzz

_UNICODE = ["\u0301", "\u202e", "\u05d0", "\U0001f600", "\u00e9", "\u200b", "\u00a0", "\ud800", "\u2028",
            "\ufeff", "\u0000", "\u3000", "\u0085"]


def adversarial_texts(seed: int = 21, n: int = 90, size: int = SIZE) -> list[tuple[str, str]]:
    """(shape, text) pairs: adversarial literals and shapes near the size cap, seeded."""
    rng = random.Random(seed)

    def fill(prefix: str, unit, suffix: str = "", sep: str = "") -> str:
        parts, used = [], len(prefix) + len(suffix)
        while True:
            u = unit() if callable(unit) else unit
            if used + len(u) + len(sep) > size:
                break
            parts.append(u)
            used += len(u) + len(sep)
        return prefix + sep.join(parts) + suffix

    def digits(k: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(k))

    def nest(open_: str, mid: str, close: str, depth: int) -> str:
        return open_ * depth + mid + close * depth

    shapes = {
        "exponent": lambda: f"SELECT * FROM range({rng.choice(['', '-'])}1e{rng.choice(['', '-', '+'])}"
                            f"{digits(rng.randint(3, 7))})",
        "exponent_anywhere": lambda: f"SELECT {rng.choice(['1', '2.5', '.5'])}e{digits(rng.randint(4, 9))} AS x",
        "long_digits": lambda: f"SELECT * FROM generate_series(1, {digits(rng.randint(50, size - 60))})",
        "long_fraction": lambda: f"SELECT * FROM range(0, 1, 0.{digits(rng.randint(50, size - 60))})",
        "interval": lambda: (f"SELECT * FROM range(TIMESTAMP '2025-01-01', TIMESTAMP '2026-01-01', "
                             f"INTERVAL '{rng.choice(['1e-300', '1e308', 'nan', 'inf', '-0', '1e-3000'])} "
                             f"{rng.choice(['second', 'day', 'microsecond'])}')"),
        "parens": lambda: "SELECT " + nest("(", "1", ")", rng.randint(50, 5000)),
        "brackets": lambda: "SELECT " + nest("[", "1", "]", rng.randint(50, 5000)),
        "subqueries": lambda: nest("SELECT * FROM (", "SELECT 1", ")", rng.randint(20, 400)),
        "functions": lambda: "SELECT " + nest("abs(", "1", ")", rng.randint(20, 2000)),
        "case": lambda: "SELECT " + nest("CASE WHEN 1 = 1 THEN ", "1", " END", rng.randint(20, 600)),
        "not_chain": lambda: "SELECT " + "NOT " * rng.randint(100, size // 4 - 5) + "TRUE",
        "minus_chain": lambda: "SELECT " + "- " * rng.randint(100, size // 2 - 5) + "1",
        "lambdas": lambda: "SELECT " + nest("list_transform([1], x -> ", "x + 1", ")", rng.randint(2, 60)),
        "in_list": lambda: fill("SELECT 1 AS x FROM fct_orders WHERE order_id IN (", lambda: digits(rng.randint(1, 6)),
                                ")", ","),
        "plus_chain": lambda: fill("SELECT ", "1", "", "+"),
        "columns": lambda: fill("SELECT ", lambda: f"c{rng.randint(0, 99)}", " FROM fct_orders", ","),
        "unions": lambda: fill("", "SELECT order_id FROM fct_orders", "", " UNION ALL "),
        "ctes": lambda: "WITH " + ", ".join(f"c{i} AS (SELECT * FROM {'c%d' % (i - 1) if i else 'fct_orders'})"
                                            for i in range(rng.randint(50, size // 40))) + " SELECT 1",
        "joins": lambda: "SELECT 1 FROM fct_orders a0 " + " ".join(
            f"JOIN fct_orders a{i} USING (order_id)" for i in range(1, rng.randint(20, size // 40))),
        "subscripts": lambda: "SELECT [1]" + "[1]" * rng.randint(100, (size - 20) // 3),
        "slices": lambda: "SELECT [1, 2]" + "[1:2]" * rng.randint(100, (size - 20) // 5),
        "methods": lambda: "SELECT 'x'" + ".upper()" * rng.randint(2, (size - 20) // 8),
        "method_on_big": lambda: "SELECT (" + "1+" * rng.randint(1000, size // 2 - 40) + "1).abs().abs()",
        "casts": lambda: "SELECT 1" + "::INT" * rng.randint(100, (size - 20) // 5),
        "dots": lambda: "SELECT " + ".".join(["a"] * rng.randint(100, size // 2 - 10)),
        "arrows": lambda: "SELECT j" + "->'a'" * rng.randint(100, (size - 20) // 5),
        "string": lambda: "SELECT '" + "x" * rng.randint(1000, size - 20) + "' AS s",
        "strings": lambda: fill("SELECT ", "'a'", "", ","),
        "quoted_ident": lambda: 'SELECT 1 AS "' + "y" * rng.randint(1000, size - 30) + '"',
        "comments": lambda: fill("SELECT 1 ", rng.choice(["/*x*/", "--x\n", "/* /* */ */"])),
        "nested_comment": lambda: "SELECT 1 " + "/*" * rng.randint(100, size // 4) + "*/" * rng.randint(100, size // 4),
        "dollar": lambda: fill("SELECT ", "$$a$$", "", ","),
        "estring": lambda: fill("SELECT ", "E'\\\\\\''", "", ","),
        "tokens": lambda: fill("SELECT ", lambda: rng.choice(["1", "+", "(", ")", ",", "x", "'a'", "::", "[", "]"])),
        "unicode_string": lambda: "SELECT '" + "".join(rng.choice(_UNICODE) for _ in range(size // 8)) + "'",
        "unicode_code": lambda: "SELECT " + "".join(rng.choice(_UNICODE + ["a", " ", "("]) for _ in range(size // 4)),
        "unicode_ident": lambda: "SELECT " + "\u00e9" * rng.randint(1000, size // 2 - 10) + " FROM fct_orders",
        "rtl_ident": lambda: 'SELECT "' + "\u05d0\u202e" * rng.randint(100, size // 6) + '"',
    }
    names = sorted(shapes)
    out = [(name, shapes[name]()) for name in names]  # every shape at least once
    while len(out) < n:
        name = rng.choice(names)
        out.append((name, shapes[name]()))
    return out


def test_fuzz_every_decision_is_quick():
    """Seeded, bounded: adversarial literals and shapes near the size cap (exponents, long
    digit strings, nesting, long token streams, chains, pathological Unicode). The filter runs
    with half the bound as its budget; every decision, allowed or refused, must come back
    within the bound and never raise. Prints the worst case measured."""
    def make():
        return StatementFilter(demo_policy(), budget_s=DECISION_BOUND_S / 2)

    sf = make()
    times = []
    for shape, sql in adversarial_texts():
        v, secs = _timed(sf, sql)
        assert v.reason is None or v.message, shape
        times.append((_least(make, sql, secs, DECISION_BOUND_S), shape, v.reason))
    worst = max(times)
    print(f"\nfilter fuzz: {len(times)} texts, worst {worst[0] * 1000:.1f} ms ({worst[1]}, {worst[2]})")
    slow = [(f"{s:.3f} s", shape, reason) for s, shape, reason in times if s >= DECISION_BOUND_S]
    assert not slow, slow


def test_fuzz_with_a_raised_size_cap_stays_bounded():
    """A policy may raise max_sql_bytes (up to 1,000,000): the token bound keeps the parse
    linear and bounded, and the budget refuses what is left."""
    big = demo_policy(overrides={"limits": {"max_sql_bytes": 200_000}})

    def make():
        return StatementFilter(big, budget_s=DECISION_BOUND_S / 2)

    sf = make()
    worst = (0.0, "")
    for shape, sql in adversarial_texts(seed=7, n=40, size=199_000):
        v, secs = _timed(sf, sql)
        worst = max(worst, (_least(make, sql, secs, 2 * DECISION_BOUND_S), shape))
    print(f"\nfilter fuzz at 200 KB: worst {worst[0] * 1000:.1f} ms ({worst[1]})")
    assert worst[0] < 2 * DECISION_BOUND_S, worst
