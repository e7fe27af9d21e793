"""Guard v3: everything returned is measured (column names and type strings count against the
caps), and no message returned or reported carries a path, a size or usage figure or a setting.

Expected sizes are computed here from the strings themselves (UTF-8 bytes), not by the cap code.
"""

from __future__ import annotations

import pytest

from sqleval_pipeline.guard.executor import GuardedExecutor, GuardResult
from sqleval_pipeline.guard.messages import scrub_message
from sqleval_pipeline.guard.policy import load_policy
from tests.conftest import BOMB_LIMITS

CELL = 4096
RESULT = 40_000


@pytest.fixture(scope="module")
def small_caps(serving_snapshot):
    policy = load_policy(overrides={"limits": {**BOMB_LIMITS,
                                               "max_cell_bytes": CELL, "max_result_bytes": RESULT,
                                               # long texts, so that names alone can be long
                                               "max_sql_bytes": 200_000}},
                         served=list(serving_snapshot.manifest.tables))
    with GuardedExecutor(serving_snapshot.path, as_of=serving_snapshot.manifest.as_of, policy=policy) as ex:
        yield ex


def _refused(r: GuardResult, reason: str) -> None:
    assert (r.status, r.layer, r.reason) == ("refused", "cap", reason), (r.status, r.layer, r.reason, r.message)
    assert r.result is None


def test_a_long_column_name_is_a_cell_over_the_cap(small_caps):
    name = "n" * (CELL + 10)
    _refused(small_caps.execute(f'SELECT 1 AS "{name}"'), "cell_too_large")
    ok = small_caps.execute(f'SELECT 1 AS "{"n" * (CELL // 2)}"')           # half the cap: fine
    assert ok.ok and ok.result.rows == [[1]]


def test_a_long_type_string_is_a_cell_over_the_cap(small_caps):
    # a struct whose field name is long: the value is tiny, its type string is not
    field = "f" * (CELL + 10)
    r = small_caps.execute(f"SELECT {{'{field}': 1}} AS s")
    _refused(r, "cell_too_large")


def test_names_and_types_add_up_against_the_result_cap(small_caps):
    # 20 columns, each name 3 KB (under the cell cap), one row of tiny values: 60 KB of header
    width = 3000
    assert 20 * width > RESULT and width < CELL
    cols = ", ".join(f'{i} AS "{str(i).zfill(2)}{"c" * (width - 2)}"' for i in range(20))
    _refused(small_caps.execute(f"SELECT {cols}"), "result_too_large")
    few = ", ".join(f'{i} AS "{str(i).zfill(2)}{"c" * (width - 2)}"' for i in range(5))   # 15 KB: fine
    ok = small_caps.execute(f"SELECT {few}")
    assert ok.ok and len(ok.result.columns) == 5, (ok.status, ok.reason, ok.message)


def test_cap_messages_name_no_limit(small_caps):
    r = small_caps.execute(f"SELECT repeat('x', {CELL * 2}) AS big")
    _refused(r, "cell_too_large")
    assert str(CELL) not in r.message and str(RESULT) not in r.message


@pytest.mark.parametrize("raw, leaked", [
    ("Out of Memory Error: failed to allocate data of size 16.0 MiB (976.5 MiB/976.5 MiB used)",
     ["976.5", "16.0", "MiB"]),
    ("Out of Memory Error: could not allocate block of size 256.0 KiB (1.2GiB/1.2GiB used). This limit was "
     "set by the 'max_temp_directory_size' setting. By default, this setting utilizes the available disk space",
     ["256.0", "1.2", "max_temp_directory_size"]),
    ("Invalid Input Error: memory_limit=1000000000 threads=2 at /home/runner/.sqleval/snap.duckdb",
     ["1000000000", "threads=2", "/home/runner"]),
    ("Invalid Input Error: The statement is 31000 bytes; the limit is 20000.", ["31000", "20000"]),
    ("Catalog Error: Cannot open file \"/tmp/sqleval-guard-x/tmp.duckdb\": 4096 bytes", ["/tmp/", "4096"]),
])
def test_messages_carry_no_setting_usage_or_path(raw, leaked):
    for text in (scrub_message(raw), GuardResult("refused", sql="SELECT 1", layer="database",
                                                 reason="memory_limit", message=raw).message):
        assert all(piece not in text for piece in leaked), text
        assert text.split(":")[0] == raw.split(":")[0]          # the kind of error survives


def test_an_ordinary_error_keeps_its_words():
    raw = 'Binder Error: Referenced column "amount_paid" not found in FROM clause! Candidate bindings: "amount"'
    assert scrub_message(raw) == raw
