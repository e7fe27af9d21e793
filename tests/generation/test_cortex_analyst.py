"""Snowflake Cortex Analyst end to end: a configuration as a user writes it (YAML → config model
→ ``make_generator``), the real HTTP client against a loopback fake that validates every
request, and attempts made by the attempt runner (retries counted, errors kept apart)."""

from __future__ import annotations

import json
import logging

import httpx2
import pytest

from sqleval_pipeline.configs import ConfigError, load_config
from sqleval_pipeline.generation import make_generator
from sqleval_pipeline.generation.base import ProviderError
from sqleval_pipeline.generation.cortex_analyst import CortexAnalystGenerator
from sqleval_pipeline.generation.runner import _Counter, make_attempt
from tests.generation.fakes import rate_limited, server_error, status
from tests.generation.vendor_fakes import (
    CORTEX_PATH,
    FakeCortexAnalyst,
    StubBuilder,
    analyst_sql,
    analyst_stream_cut,
    analyst_stream_error,
    analyst_suggestions,
    analyst_text,
    make_case,
)

TOKEN = "sf-pat-0123456789-secret"
QUESTION = "How many orders were placed in June 2025?"

CONFIG = """\
name: cortex
generator:
  kind: cortex_analyst
  account_url: {url}
  token_env: SNOWFLAKE_TOKEN
  semantic_model_file: "@analytics.marts.models/commerce.yaml"
{extra}dialect: snowflake
context: {{curation: false}}
max_retries: 3
"""


@pytest.fixture
def fake():
    with FakeCortexAnalyst(token=TOKEN) as server:
        yield server


@pytest.fixture(autouse=True)
def _token(monkeypatch):
    monkeypatch.setenv("SNOWFLAKE_TOKEN", TOKEN)


def _load(tmp_path, url: str, extra: str = ""):
    path = tmp_path / "cortex.yaml"
    path.write_text(CONFIG.format(url=url, extra=extra))
    return load_config(path, tmp_path)


def _generator(tmp_path, fake, extra: str = ""):
    loaded = _load(tmp_path, fake.base_url, extra)
    loaded.config.timeout_s = 5
    return make_generator(loaded, None, None, tmp_path)


def _attempt(gen, waits=None, max_retries=3):
    return make_attempt(make_case(QUESTION), 0, config_version="cfg12345", batch_id="b1",
                        generator=gen, builder=StubBuilder(), max_retries=max_retries,
                        calls=_Counter(), sleep=(waits.append if waits is not None else lambda s: None))


# ---------------------------------------------------------------------------- answers


def test_sql_answer_through_the_configuration(tmp_path, fake):
    confidence = {"verified_query_used": {"name": "june orders", "question": "Orders in June?",
                                          "sql": "SELECT 2", "verified_at": 1714497970,
                                          "verified_by": "Jane Doe"}}
    fake.queue(analyst_sql("SELECT COUNT(*) FROM orders WHERE month = 6", confidence=confidence,
                           warnings=["Table orders has 40 columns"]))
    loaded = _load(tmp_path, fake.base_url)
    assert loaded.provider == f"cortex_analyst:127.0.0.1:{fake.port}"
    with make_generator(loaded, None, None, tmp_path) as gen:
        assert isinstance(gen, CortexAnalystGenerator)
        attempt = _attempt(gen)
    assert (attempt.kind, attempt.sql, attempt.retries) == (
        "sql", "SELECT COUNT(*) FROM orders WHERE month = 6", 0)
    assert attempt.generator == f"cortex_analyst:127.0.0.1:{fake.port}"
    raw = json.loads(attempt.raw_response)
    assert raw["message"]["content"][1]["confidence"] == confidence  # kept for audit
    assert TOKEN not in attempt.raw_response

    req = fake.last
    assert fake.rejections == []
    assert req.method == "POST" and req.path == CORTEX_PATH
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    assert req.headers["x-snowflake-authorization-token-type"] == "PROGRAMMATIC_ACCESS_TOKEN"
    # only the question and the semantic model: never the prompt, schema or glossary
    assert req.json == {"messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
                        "semantic_model_file": "@analytics.marts.models/commerce.yaml",
                        "stream": False}


def test_text_only_is_a_refusal_with_its_text(tmp_path, fake):
    fake.queue(analyst_text("I cannot answer questions about employee salaries."))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "refusal" and attempt.sql is None
    assert attempt.refusal_reason == "I cannot answer questions about employee salaries."


def test_suggestions_are_a_refusal_carrying_them(tmp_path, fake):
    fake.queue(analyst_suggestions("Your question is ambiguous, here are some alternatives:",
                                   ["Which company had the most revenue?",
                                    "Which company placed the most orders?"]))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "refusal"
    assert attempt.refusal_reason == ("Your question is ambiguous, here are some alternatives: "
                                      "Suggestions: Which company had the most revenue?; "
                                      "Which company placed the most orders?")


@pytest.mark.parametrize("token_type", ["KEYPAIR_JWT", "OAUTH"])
def test_the_token_type_is_sent_as_configured(tmp_path, fake, token_type):
    with _generator(tmp_path, fake, f"  token_type: {token_type}\n") as gen:
        assert _attempt(gen).kind == "sql"
    assert fake.last.headers["x-snowflake-authorization-token-type"] == token_type


@pytest.mark.parametrize("model_yaml, expected", [
    ('  semantic_view: analytics.marts.commerce_view\n',
     {"semantic_view": "analytics.marts.commerce_view"}),
    ('  semantic_model: "name: commerce\\ntables: []\\n"\n',
     {"semantic_model": "name: commerce\ntables: []\n"}),
    ('  semantic_models:\n    - semantic_view: a.b.v1\n    - semantic_model_file: "@a.b.s/m.yaml"\n',
     {"semantic_models": [{"semantic_view": "a.b.v1"}, {"semantic_model_file": "@a.b.s/m.yaml"}]}),
])
def test_each_kind_of_semantic_model_is_sent_alone(tmp_path, fake, model_yaml, expected):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\ngenerator:\n  kind: cortex_analyst\n  account_url: {fake.base_url}\n"
                    f"{model_yaml}dialect: snowflake\ncontext: {{curation: false}}\n")
    with make_generator(load_config(path, tmp_path), None, None, tmp_path) as gen:
        assert _attempt(gen).kind == "sql"
    body = fake.last.json
    assert {k: v for k, v in body.items() if k.startswith("semantic")} == expected
    assert fake.rejections == []


# ---------------------------------------------------------------------------- streaming


def test_streaming_joins_the_deltas_into_the_same_answer(tmp_path, fake):
    confidence = {"verified_query_used": {"name": "vq", "question": "q", "sql": "SELECT 9"}}
    fake.queue(analyst_sql("SELECT region, SUM(net) FROM orders GROUP BY region",
                           text="Net revenue by region.", confidence=confidence,
                           warnings=["wide table"]))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        attempt = _attempt(gen)
    assert fake.last.json["stream"] is True
    assert fake.last.headers["accept"] == "text/event-stream"
    assert (attempt.kind, attempt.sql) == ("sql", "SELECT region, SUM(net) FROM orders GROUP BY region")
    raw = json.loads(attempt.raw_response)
    assert raw["streamed"] is True and raw["statuses"][-1] == "done"
    assert raw["message"]["content"] == [
        {"type": "text", "text": "Net revenue by region."},
        {"type": "sql", "statement": "SELECT region, SUM(net) FROM orders GROUP BY region",
         "confidence": confidence}]
    assert raw["warnings"] == [{"message": "wide table"}]


def test_streamed_suggestions_are_a_refusal(tmp_path, fake):
    fake.queue(analyst_suggestions("Ambiguous.", ["Revenue by month?", "Orders by city?"]))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "refusal"
    assert attempt.refusal_reason == "Ambiguous. Suggestions: Revenue by month?; Orders by city?"


def test_a_stream_error_event_is_retried_then_an_error_with_its_reason(tmp_path, fake):
    fake.queue(analyst_stream_error("The semantic model could not be loaded", "399506"),
               analyst_stream_error("The semantic model could not be loaded", "399506"))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        attempt = _attempt(gen, max_retries=1)
    assert attempt.kind == "error" and attempt.error_code == "server_error"
    assert attempt.retries == 1 and fake.calls == 2
    assert "The semantic model could not be loaded" in attempt.error_message
    assert "code 399506" in attempt.error_message and "request_id" in attempt.error_message


def test_a_stream_cut_before_done_is_malformed(tmp_path, fake):
    fake.queue(analyst_stream_cut("SELECT 1"))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        with pytest.raises(ProviderError) as err:
            gen.generate(StubBuilder().build("q1", QUESTION, 0))
    assert err.value.code == "malformed_response" and err.value.retryable
    assert "before its done status" in err.value.message


def test_an_error_status_on_a_streamed_request_is_mapped(tmp_path, fake):
    fake.queue(status(400, "Invalid semantic model: table orders has no columns"))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and attempt.error_code == "bad_request" and attempt.retries == 0
    assert "table orders has no columns" in attempt.error_message
    assert "code 399504" in attempt.error_message


def test_a_streamed_request_answered_with_plain_json_is_read_all_the_same(tmp_path, fake):
    from tests.generation.fakes import raw

    fake.queue(raw(200, {"request_id": "r-9", "message": {"role": "analyst", "content": [
        {"type": "sql", "statement": "SELECT 9"}]}}))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        attempt = _attempt(gen)
    assert (attempt.kind, attempt.sql) == ("sql", "SELECT 9")
    assert json.loads(attempt.raw_response)["request_id"] == "r-9"


def test_an_event_whose_data_is_not_json_is_malformed(tmp_path, fake):
    from tests.generation.fakes import raw

    fake.queue(raw(200, b"event: status\ndata: {not json\n\n", {"content-type": "text/event-stream"}))
    with _generator(tmp_path, fake, "  stream: true\n") as gen:
        with pytest.raises(ProviderError) as err:
            gen.generate(StubBuilder().build("q1", QUESTION, 0))
    assert err.value.code == "malformed_response" and "'status' event" in err.value.message


# ---------------------------------------------------------------------------- errors and retries


def test_429_with_retry_after_is_retried_and_counted(tmp_path, fake):
    waits: list[float] = []
    fake.queue(rate_limited(7), analyst_sql("SELECT 42"))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen, waits)
    assert (attempt.kind, attempt.sql, attempt.retries) == ("sql", "SELECT 42", 1)
    assert fake.calls == 2 and len(waits) == 1 and waits[0] >= 7


def test_5xx_is_retried_until_the_retries_run_out(tmp_path, fake):
    waits: list[float] = []
    fake.queue(server_error(500), server_error(503), server_error(502), server_error(500))
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen, waits, max_retries=3)
    assert attempt.kind == "error" and attempt.error_code == "server_error"
    assert attempt.retries == 3 and fake.calls == 4 and len(waits) == 3
    assert "HTTP 500" in attempt.error_message and "request_id" in attempt.error_message


def test_a_wrong_token_is_an_auth_error_naming_the_variable_not_the_token(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("SNOWFLAKE_TOKEN", "not-the-right-token")
    with _generator(tmp_path, fake) as gen:
        attempt = _attempt(gen)
    assert attempt.kind == "error" and attempt.error_code == "auth_error" and attempt.retries == 0
    assert fake.rejections[0][0] == 401
    assert "SNOWFLAKE_TOKEN" in attempt.error_message
    assert "not-the-right-token" not in attempt.error_message
    assert "not-the-right-token" not in (attempt.raw_response or "")


def test_a_missing_token_stops_before_the_first_case(tmp_path, fake, monkeypatch):
    monkeypatch.delenv("SNOWFLAKE_TOKEN")
    with pytest.raises(ProviderError) as err:
        _generator(tmp_path, fake)
    assert err.value.code == "missing_credentials" and "set SNOWFLAKE_TOKEN" in err.value.message
    assert fake.calls == 0


@pytest.mark.parametrize("content, fragment", [
    ([], "no SQL, text or suggestions"),
    ([{"type": "sql", "statement": "  "}], "no SQL, text or suggestions"),
    ("SELECT 1", "not a list"),
])
def test_an_answer_without_usable_content_is_malformed(tmp_path, fake, content, fragment):
    from tests.generation.fakes import raw

    fake.queue(raw(200, {"request_id": "r", "message": {"role": "analyst", "content": content}}))
    with _generator(tmp_path, fake) as gen:
        with pytest.raises(ProviderError) as err:
            gen.generate(StubBuilder().build("q1", QUESTION, 0))
    assert err.value.code == "malformed_response" and fragment in err.value.message


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("generator_yaml, fragments", [
    ("  account_url: https://org-acct.snowflakecomputing.com\n",
     ["field 'generator'", "exactly one of semantic_model_file", "none of them"]),
    ("  account_url: https://org-acct.snowflakecomputing.com\n  semantic_view: a.b.v\n"
     "  semantic_model_file: \"@a.b.s/m.yaml\"\n",
     ["semantic_model_file and semantic_view"]),
    ("  account_url: https://org-acct.snowflakecomputing.com\n  semantic_model_file: model.yaml\n",
     ["field 'generator.semantic_model_file'", "not a stage path", "@db.schema.stage/model.yaml"]),
    ("  account_url: org-acct.snowflakecomputing.com\n  semantic_view: a.b.v\n",
     ["field 'generator.account_url'", "not an http(s) URL"]),
    ("  account_url: https://x\n  semantic_view: a.b.v\n  token_type: PASSWORD\n",
     ["field 'generator.token_type'", "PROGRAMMATIC_ACCESS_TOKEN"]),
    ("  account_url: https://x\n  semantic_models:\n    - {semantic_view: a, semantic_model_file: \"@a.b.s/m.yaml\"}\n",
     ["generator.semantic_models.0", "sets exactly one of"]),
    ("  account_url: https://x\n  semantic_models: []\n",
     ["generator.semantic_models"]),
])
def test_a_bad_configuration_names_file_line_and_field(tmp_path, generator_yaml, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text("name: c\ngenerator:\n  kind: cortex_analyst\n" + generator_yaml
                    + "dialect: snowflake\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, tmp_path)
    message = str(err.value)
    assert message.startswith(f"{path}:")
    for fragment in fragments:
        assert fragment in message, message


def test_a_configuration_without_the_snowflake_dialect_is_warned_about(tmp_path, caplog):
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ngenerator: {kind: cortex_analyst, account_url: 'https://x', "
                    "semantic_view: a.b.v}\n")
    with caplog.at_level(logging.WARNING):
        load_config(path, tmp_path)
    assert "answers in snowflake SQL" in caplog.text and "set dialect: snowflake" in caplog.text


# ---------------------------------------------------------------------------- the fake itself


def _post(fake, body, headers=None, path=CORTEX_PATH, method="POST"):
    base = {"authorization": f"Bearer {TOKEN}",
            "x-snowflake-authorization-token-type": "PROGRAMMATIC_ACCESS_TOKEN",
            "content-type": "application/json"}
    base.update(headers or {})
    base = {k: v for k, v in base.items() if v is not None}
    return httpx2.request(method, fake.base_url + path, content=json.dumps(body), headers=base)


GOOD = {"messages": [{"role": "user", "content": [{"type": "text", "text": "q?"}]}],
        "semantic_view": "a.b.v"}


@pytest.mark.parametrize("change, code", [
    ({"headers": {"authorization": None}}, 401),
    ({"headers": {"authorization": "Bearer nope"}}, 401),
    ({"headers": {"x-snowflake-authorization-token-type": None}}, 401),
    ({"headers": {"x-snowflake-authorization-token-type": "PASSWORD"}}, 401),
    ({"path": "/api/v2/cortex/analyst/messages"}, 404),
    ({"method": "GET"}, 405),
    ({"body": {**GOOD, "semantic_model_file": "@a.b.s/m.yaml"}}, 400),
    ({"body": {"messages": GOOD["messages"]}}, 400),
    ({"body": {**GOOD, "messages": [{"role": "analyst", "content": [{"type": "text", "text": "q"}]}]}}, 400),
    ({"body": {**GOOD, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]}]}}, 400),
    ({"body": {**GOOD, "messages": [{"role": "user", "content": "q?"}]}}, 400),
    ({"body": {**GOOD, "question": "q?"}}, 400),
    ({"body": {**GOOD, "stream": "yes"}}, 400),
])
def test_the_fake_rejects_what_cortex_analyst_would(fake, change, code):
    response = _post(fake, change.get("body", GOOD), change.get("headers"),
                     change.get("path", CORTEX_PATH), change.get("method", "POST"))
    assert response.status_code == code
    body = response.json()
    assert set(body) == {"message", "code", "request_id"} and body["message"]
    assert fake.rejections[-1][0] == code and fake.calls == 1


def test_the_fake_accepts_a_valid_request(fake):
    response = _post(fake, GOOD)
    assert response.status_code == 200 and response.json()["message"]["role"] == "analyst"
