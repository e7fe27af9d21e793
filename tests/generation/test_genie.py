"""Databricks Genie end to end: a configuration as a user writes it (YAML → config model →
``make_generator``), the real HTTP client against a loopback fake of the Conversation API that
validates every request, polling with an injected clock and sleep (nothing really waits), and
attempts made by the attempt runner."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import httpx2
import pytest

from sqleval_pipeline.configs import ConfigError, load_config
from sqleval_pipeline.generation import make_generator
from sqleval_pipeline.generation.base import ProviderError
from sqleval_pipeline.generation.genie import GenieGenerator, decode_rows
from sqleval_pipeline.generation.runner import _Counter, make_attempt
from sqleval_pipeline.results import ResultSet
from tests.generation.fakes import rate_limited, server_error
from tests.generation.vendor_fakes import (
    FakeGenie,
    GenieReply,
    StubBuilder,
    genie_cancelled,
    genie_failed,
    genie_sql,
    genie_stuck,
    genie_text,
    make_case,
    statement,
)

TOKEN = "dapi0123456789abcdef-secret"
SPACE = "01ef1234567890abcdef1234567890ab"
QUESTION = "How many orders were placed in June 2025?"

CONFIG = """\
name: genie
generator:
  kind: genie
  host: {host}
  token_env: DATABRICKS_TOKEN
  space_id: {space}
{extra}dialect: databricks
context: {{curation: false}}
max_retries: 3
"""


class FakeClock:
    """A monotonic clock that moves only when the generator sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def fake():
    with FakeGenie(token=TOKEN, spaces=[SPACE]) as server:
        yield server


@pytest.fixture(autouse=True)
def _token(monkeypatch):
    monkeypatch.setenv("DATABRICKS_TOKEN", TOKEN)


def _load(tmp_path, host: str, extra: str = "", space: str = SPACE):
    path = tmp_path / "genie.yaml"
    path.write_text(CONFIG.format(host=host, extra=extra, space=space))
    return load_config(path, tmp_path)


def _generator(tmp_path, fake, extra: str = "", clock: FakeClock | None = None) -> GenieGenerator:
    loaded = _load(tmp_path, fake.base_url, extra)
    loaded.config.timeout_s = 5
    gen = make_generator(loaded, None, None, tmp_path)
    clock = clock or FakeClock()
    gen.clock, gen.sleep = clock, clock.sleep
    return gen


def _attempt(gen, waits=None, max_retries=3, question=QUESTION):
    return make_attempt(make_case(question), 0, config_version="cfg12345", batch_id="b1",
                        generator=gen, builder=StubBuilder(), max_retries=max_retries,
                        calls=_Counter(), sleep=(waits.append if waits is not None else lambda s: None))


def _paths(fake):
    return [(r.method, r.path) for r in fake.requests]


# ---------------------------------------------------------------------------- answers


def test_sql_answer_after_polling_through_the_configuration(tmp_path, fake):
    fake.queue(genie_sql("SELECT COUNT(*) FROM orders WHERE order_month = '2025-06'",
                         description="Counts June orders."))
    clock = FakeClock()
    loaded = _load(tmp_path, fake.base_url)
    assert loaded.provider == f"genie:127.0.0.1:{fake.port}"
    with _generator(tmp_path, fake, clock=clock) as gen:
        assert isinstance(gen, GenieGenerator)
        attempt = _attempt(gen)
    assert (attempt.kind, attempt.sql, attempt.retries) == (
        "sql", "SELECT COUNT(*) FROM orders WHERE order_month = '2025-06'", 0)
    assert attempt.generator == f"genie:127.0.0.1:{fake.port}/{SPACE}"

    conv, = fake.conversations
    msg = next(iter(fake.messages))
    space = f"/api/2.0/genie/spaces/{SPACE}"
    # start, then one GET per status after SUBMITTED: FETCHING_METADATA, ASKING_AI,
    # EXECUTING_QUERY, COMPLETED — and no query-result fetch (off by default)
    assert _paths(fake) == [("POST", f"{space}/start-conversation")] + [
        ("GET", f"{space}/conversations/{conv}/messages/{msg}")] * 4
    assert fake.requests[0].json == {"content": QUESTION}  # the question only, never the prompt
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert fake.rejections == []
    # waits 1, 2, 4, then capped at poll_max_interval_s (10): 8
    assert clock.waits == [1.0, 2.0, 4.0, 8.0]

    record = json.loads(attempt.raw_response)
    assert record["conversation_id"] == conv and record["message_id"] == msg
    assert record["statuses"] == ["SUBMITTED", "FETCHING_METADATA", "ASKING_AI",
                                  "EXECUTING_QUERY", "COMPLETED"]
    assert record["message"]["attachments"][0]["query"]["description"] == "Counts June orders."
    assert "vendor_result" not in record and TOKEN not in attempt.raw_response


def test_every_question_starts_a_new_conversation(tmp_path, fake):
    with _generator(tmp_path, fake) as gen:
        first = _attempt(gen, question="How many orders in June?")
        second = _attempt(gen, question="And in July?")
    assert first.kind == second.kind == "sql"
    starts = [r for r in fake.requests if r.method == "POST"]
    assert [r.json["content"] for r in starts] == ["How many orders in June?", "And in July?"]
    assert all(r.path.endswith("/start-conversation") for r in starts)
    assert len(set(fake.conversations)) == 2


def test_text_only_is_a_refusal_with_its_text_and_suggestions(tmp_path, fake):
    fake.queue(genie_text("Salary data is not available in this space.",
                          suggested=["How many employees joined in 2025?"]))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "refusal" and attempt.sql is None
    assert attempt.refusal_reason == ("Salary data is not available in this space. "
                                      "Suggestions: How many employees joined in 2025?")


def test_failed_is_an_error_with_genie_s_reason_and_is_not_retried(tmp_path, fake):
    fake.queue(genie_failed("[TABLE_OR_VIEW_NOT_FOUND] orders_v2 cannot be found"))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and attempt.error_code == "server_error"
    assert attempt.retries == 0 and len(fake.conversations) == 1
    assert attempt.error_message == ("Genie answered FAILED: GENERIC_SQL_EXEC_EXCEPTION: "
                                     "[TABLE_OR_VIEW_NOT_FOUND] orders_v2 cannot be found")
    assert json.loads(attempt.raw_response)["statuses"][-1] == "FAILED"


def test_cancelled_is_an_error(tmp_path, fake):
    fake.queue(genie_cancelled())
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and "CANCELLED" in attempt.error_message


def test_completed_without_a_usable_attachment_is_malformed(tmp_path, fake):
    fake.queue(GenieReply(attachments=({"attachment_id": "a1", "query": {"query": " "}},)))
    with _generator(tmp_path, fake) as gen:
        with pytest.raises(ProviderError) as err:
            gen.generate(StubBuilder().build("q1", QUESTION, 0))
    assert err.value.code == "malformed_response" and "no query and no text" in err.value.message


def test_a_batch_through_the_attempt_runner_asks_each_case_and_run_in_its_own_conversation(tmp_path, fake):
    from sqleval_pipeline.generation.runner import open_batch, run_attempts
    from sqleval_pipeline.pipeline.store import Store

    cases = [make_case("How many orders in June?", "ven-001"),
             make_case("What is salary of the CEO?", "ven-002")]
    fake.default = lambda req: (genie_text("Salaries are not in this space.")
                                if "salary" in req.json["content"] else genie_sql("SELECT 1"))
    store = Store(tmp_path / "store")
    info = open_batch(store, partition_key="genie@00000000", config_name="genie",
                      config_version="00000000", snapshot_id="snap-000000000000", cases=cases, runs=3)
    with _generator(tmp_path, fake) as gen:
        result = run_attempts(store=store, info=info, cases=cases, generator=gen,
                              builder=StubBuilder(), concurrency=2, max_retries=2,
                              sleep=lambda s: None)
    kinds = sorted((a.case_id, a.run_index, a.kind) for a in result.attempts)
    assert kinds == [("ven-001", i, "sql") for i in range(3)] + [("ven-002", i, "refusal") for i in range(3)]
    assert result.provider_calls == 6 and len(set(fake.conversations)) == 6
    assert fake.rejections == []


# ---------------------------------------------------------------------------- the poll is bounded


def test_a_message_that_never_finishes_times_out_within_max_wait(tmp_path, fake):
    fake.queue(genie_stuck("PENDING_WAREHOUSE"))
    clock = FakeClock()
    extra = ("  poll_interval_s: 1\n  poll_backoff: 2\n  poll_max_interval_s: 4\n"
             "  max_wait_s: 10\n")
    with _generator(tmp_path, fake, extra, clock) as gen:
        attempt = _attempt(gen)
    # 1 + 2 + 4 = 7 s, then the last wait is cut to the 3 s left: 10 s in all, never more
    assert clock.waits == [1.0, 2.0, 4.0, 3.0] and sum(clock.waits) == 10
    assert len([r for r in fake.requests if r.method == "GET"]) == 4
    assert attempt.kind == "error" and attempt.error_code == "provider_timeout"
    assert attempt.retries == 0 and len(fake.conversations) == 1
    assert "within max_wait_s = 10 s" in attempt.error_message
    assert "last status PENDING_WAREHOUSE" in attempt.error_message


def test_the_poll_is_bounded_even_when_the_clock_stands_still(tmp_path, fake):
    fake.queue(genie_stuck())
    waits: list[float] = []

    class Frozen(FakeClock):
        def sleep(self, seconds):
            waits.append(seconds)

    with _generator(tmp_path, fake, "  max_wait_s: 5\n", Frozen()) as gen:
        with pytest.raises(ProviderError) as err:
            gen.generate(StubBuilder().build("q1", QUESTION, 0))
    assert err.value.code == "provider_timeout" and sum(waits) == 5


# ---------------------------------------------------------------------------- HTTP errors and retries


def test_429_on_start_is_retried_honouring_retry_after(tmp_path, fake):
    waits: list[float] = []
    fake.queue(rate_limited(9), genie_sql("SELECT 7"))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen, waits)
    assert (attempt.kind, attempt.sql, attempt.retries) == ("sql", "SELECT 7", 1)
    assert len(waits) == 1 and waits[0] >= 9
    assert len(fake.conversations) == 1  # the rate-limited start made none


def test_a_5xx_while_polling_asks_again_in_a_new_conversation(tmp_path, fake):
    fake.queue(genie_sql("SELECT 1", poll_raw={2: server_error(503)}), genie_sql("SELECT 2"))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert (attempt.kind, attempt.sql, attempt.retries) == ("sql", "SELECT 2", 1)
    assert len(set(fake.conversations)) == 2


def test_5xx_until_the_retries_run_out_is_an_error(tmp_path, fake):
    fake.queue(*[server_error(500)] * 3)
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen, max_retries=2)
    assert attempt.kind == "error" and attempt.error_code == "server_error" and attempt.retries == 2
    assert "error_code INTERNAL_ERROR" in attempt.error_message


def test_a_wrong_token_is_an_auth_error_naming_the_variable(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-wrong")
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and attempt.error_code == "auth_error" and attempt.retries == 0
    assert "DATABRICKS_TOKEN" in attempt.error_message and "dapi-wrong" not in attempt.error_message
    assert fake.rejections[0][0] == 401


def test_an_unknown_space_is_a_bad_request(tmp_path, fake):
    loaded = _load(tmp_path, fake.base_url, space="01efnotaspace")
    with make_generator(loaded, None, None, tmp_path) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and attempt.error_code == "bad_request"
    assert "does not exist" in attempt.error_message


def test_a_missing_token_stops_before_the_first_case(tmp_path, fake, monkeypatch):
    monkeypatch.delenv("DATABRICKS_TOKEN")
    with pytest.raises(ProviderError) as err:
        _generator(tmp_path, fake)
    assert err.value.code == "missing_credentials" and "set DATABRICKS_TOKEN" in err.value.message


# ---------------------------------------------------------------------------- Genie's own rows


RESULT = statement(
    [{"name": "orders", "type_name": "LONG"}, {"name": "revenue", "type_name": "DOUBLE"},
     {"name": "net", "type_name": "DECIMAL", "type_precision": 18, "type_scale": 2},
     {"name": "cod", "type_name": "BOOLEAN"}, {"name": "day", "type_name": "DATE"},
     {"name": "at", "type_name": "TIMESTAMP"}, {"name": "city", "type_name": "STRING"}],
    [["1520", "3.336E8", "123.40", "true", "2025-06-01", "2025-06-01T10:30:00.000Z", "Pune"],
     ["7", None, "-0.05", "false", None, None, None]])


def test_fetched_rows_are_decoded_by_their_column_types(tmp_path, fake):
    fake.queue(genie_sql("SELECT ...", result=RESULT))
    with _generator(tmp_path, fake, "  fetch_query_result: true\n") as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "sql"
    fetch = fake.requests[-1]
    message = json.loads(attempt.raw_response)["message"]
    attachment_id = message["attachments"][0]["attachment_id"]
    assert fetch.method == "GET" and fetch.path.endswith(
        f"/messages/{message['message_id']}/attachments/{attachment_id}/query-result")
    record = json.loads(attempt.raw_response)
    assert "vendor_result_error" not in record and record["query_result"]["state"] == "SUCCEEDED"
    rows = ResultSet.from_json(record["vendor_result"])
    assert rows.columns == ["orders", "revenue", "net", "cod", "day", "at", "city"]
    assert rows.rows == [
        [1520, 333600000.0, Decimal("123.40"), True, dt.date(2025, 6, 1),
         dt.datetime(2025, 6, 1, 10, 30, tzinfo=dt.timezone.utc), "Pune"],
        [7, None, Decimal("-0.05"), False, None, None, None]]


def test_a_failed_result_fetch_keeps_the_sql_and_says_why(tmp_path, fake):
    fake.queue(genie_sql("SELECT 5", result_raw=server_error(500)))
    with _generator(tmp_path, fake, "  fetch_query_result: true\n") as gen:
        attempt = _attempt(gen)
    assert (attempt.kind, attempt.sql, attempt.retries) == ("sql", "SELECT 5", 0)
    record = json.loads(attempt.raw_response)
    assert record["vendor_result_error"].startswith("server_error:") and "vendor_result" not in record


def test_rows_that_do_not_read_as_their_type_are_reported_not_guessed(tmp_path, fake):
    bad = statement([{"name": "n", "type_name": "INT"}], [["12"], ["twelve"]])
    fake.queue(genie_sql("SELECT n", result=bad))
    with _generator(tmp_path, fake, "  fetch_query_result: true\n") as gen:
        attempt = _attempt(gen)
    record = json.loads(attempt.raw_response)
    assert attempt.kind == "sql" and "vendor_result" not in record
    assert "row 1" in record["vendor_result_error"] and "twelve" in record["vendor_result_error"]


@pytest.mark.parametrize("column, text, expected", [
    ({"type_name": "DOUBLE"}, "3.336E8", 333600000.0),
    ({"type_name": "FLOAT"}, "-1.5E-3", -0.0015),
    ({"type_name": "DECIMAL", "type_precision": 38, "type_scale": 0}, "3.336E8", Decimal("333600000")),
    ({"type_name": "BOOLEAN"}, "TRUE", True),
    ({"type_name": "SHORT"}, "-12", -12),
    ({"type_name": "TIMESTAMP", "type_text": "TIMESTAMP_NTZ"}, "2025-06-30T23:59:59", dt.datetime(2025, 6, 30, 23, 59, 59)),
    ({"type_name": "ARRAY", "type_text": "ARRAY<INT>"}, "[1,2]", "[1,2]"),
    ({"type_name": "INT"}, None, None),
])
def test_decode_rows_by_type_name(column, text, expected):
    value = decode_rows([{"name": "c", **column}], [[text]]).rows[0][0]
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("columns, rows, fragment", [
    ([{"name": "b", "type_name": "BOOLEAN"}], [["yes"]], "not a BOOLEAN"),
    ([{"name": "d", "type_name": "DECIMAL"}], [["1,5"]], "not a DECIMAL"),
    ([{"name": "a", "type_name": "INT"}, {"name": "b", "type_name": "INT"}], [["1"]], "1 values for 2 columns"),
])
def test_decode_rows_refuses_what_it_cannot_read(columns, rows, fragment):
    with pytest.raises(ValueError, match=fragment):
        decode_rows(columns, rows)


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("generator_yaml, fragments", [
    ("  host: https://w.cloud.databricks.com\n", ["field 'generator.space_id'", "Field required"]),
    ("  host: w.cloud.databricks.com\n  space_id: s1\n", ["field 'generator.host'", "not an http(s) URL"]),
    ("  host: https://w\n  space_id: s1\n  poll_interval_s: 5\n  poll_max_interval_s: 2\n",
     ["poll_max_interval_s (2) is below poll_interval_s (5)"]),
    ("  host: https://w\n  space_id: s1\n  max_wait_s: 0\n", ["field 'generator.max_wait_s'"]),
    ("  host: https://w\n  space_id: s1\n  follow_up: true\n", ["field 'generator.follow_up'", "Extra inputs"]),
])
def test_a_bad_configuration_names_file_line_and_field(tmp_path, generator_yaml, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text("name: g\ngenerator:\n  kind: genie\n" + generator_yaml + "dialect: databricks\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, tmp_path)
    message = str(err.value)
    assert message.startswith(f"{path}:")
    for fragment in fragments:
        assert fragment in message, message


# ---------------------------------------------------------------------------- the fake itself


def _call(fake, method, path, body=None, token=TOKEN):
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return httpx2.request(method, fake.base_url + path,
                          content=json.dumps(body) if body is not None else None, headers=headers)


START = f"/api/2.0/genie/spaces/{SPACE}/start-conversation"


@pytest.mark.parametrize("method, path, body, token, code", [
    ("POST", START, {"content": "q?"}, None, 401),
    ("POST", START, {"content": "q?"}, "dapi-wrong", 401),
    ("POST", "/api/2.0/genie/spaces/nope/start-conversation", {"content": "q?"}, TOKEN, 404),
    ("POST", f"/api/2.0/genie/spaces/{SPACE}/start", {"content": "q?"}, TOKEN, 404),
    ("GET", START, None, TOKEN, 405),
    ("POST", START, {"question": "q?"}, TOKEN, 400),
    ("POST", START, {"content": ""}, TOKEN, 400),
    ("POST", START, {"content": "q?", "conversation_id": "c1"}, TOKEN, 400),
    ("POST", START, ["q?"], TOKEN, 400),
    ("GET", f"/api/2.0/genie/spaces/{SPACE}/conversations/c1/messages/m1", None, TOKEN, 404),
])
def test_the_fake_rejects_what_genie_would(fake, method, path, body, token, code):
    response = _call(fake, method, path, body, token)
    assert response.status_code == code
    assert set(response.json()) == {"error_code", "message"}
    assert fake.rejections[-1][0] == code and fake.conversations == []


def test_the_fake_follows_a_message_through_its_statuses(fake):
    fake.queue(genie_sql("SELECT 3"))
    start = _call(fake, "POST", START, {"content": "q?"}).json()
    url = (f"/api/2.0/genie/spaces/{SPACE}/conversations/{start['conversation_id']}"
           f"/messages/{start['message_id']}")
    seen = [start["message"]["status"]] + [_call(fake, "GET", url).json()["status"] for _ in range(4)]
    assert seen == ["SUBMITTED", "FETCHING_METADATA", "ASKING_AI", "EXECUTING_QUERY", "COMPLETED"]
    # a conversation id of another message does not find this one
    other = url.replace(start["conversation_id"], "c-other")
    assert _call(fake, "GET", other).status_code == 404


# ---------------------------------------------------------------------------- docstring examples


@pytest.mark.parametrize("name", ["sqleval_pipeline.generation.genie",
                                  "sqleval_pipeline.generation.cortex_analyst",
                                  "sqleval_pipeline.generation.vendor_common"])
def test_docstring_examples_of_the_vendor_modules(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
