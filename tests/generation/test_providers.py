"""The anthropic, openai and http generators through their real client code paths, against
loopback fakes: answers, refusals, retries, malformed bodies, timeouts, credentials."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from sqleval_pipeline.configs import AnthropicSettings, HttpSettings, OpenAISettings
from sqleval_pipeline.generation.anthropic_gen import AnthropicGenerator
from sqleval_pipeline.generation.base import Generator, ProviderError
from sqleval_pipeline.generation.http_gen import HttpGenerator
from sqleval_pipeline.generation.openai_gen import LOCAL_PLACEHOLDER_KEY, OpenAIGenerator
from sqleval_pipeline.generation.retry import call_with_retries
from tests.generation.fakes import (
    FakeTextToSqlService,
    make_context,
    malformed,
    raw,
    rate_limited,
    refusal,
    server_error,
    sql,
    status,
    text,
)

MODEL = "claude-sonnet-4-5-20250929"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raises(code: str, fn) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        fn()
    assert info.value.code == code, info.value
    return info.value


# =========================================================================== anthropic


@pytest.fixture
def claude(fake_anthropic):
    gen = AnthropicGenerator(AnthropicSettings(model=MODEL, base_url=fake_anthropic.base_url),
                             api_key="test-key", timeout_s=5)
    yield gen
    gen.close()


def test_anthropic_sql_answer_and_request(claude, fake_anthropic, ctx):
    fake_anthropic.queue(sql("SELECT count(*) FROM marts.fct_orders"))
    out = claude.generate(ctx)
    assert isinstance(claude, Generator)
    assert (out.kind, out.sql, out.refusal_reason) == ("sql", "SELECT count(*) FROM marts.fct_orders", None)
    assert out.model == MODEL and claude.name == f"anthropic:{MODEL}"
    assert out.temperature is None and out.temperature_settable is False
    assert out.usage.input_tokens == 120 and out.usage.output_tokens == 30
    assert out.usage.latency_ms > 0
    assert json.loads(out.raw_response)["content"][0]["type"] == "thinking"

    req = fake_anthropic.last
    assert req.path == "/v1/messages"
    assert req.headers["authorization"] == "Bearer test-key"
    assert req.headers["x-stainless-retry-count"] == "0"
    body = req.json
    assert body["model"] == MODEL and body["max_tokens"] == 2048
    assert body["messages"] == [{"role": "user", "content": ctx.prompt}]
    assert body["thinking"] == {"type": "adaptive"}
    assert "temperature" not in body
    schema = body["output_config"]["format"]["schema"]
    assert set(schema["properties"]) == {"kind", "sql", "refusal_reason"}


def test_anthropic_refusal(claude, fake_anthropic, ctx):
    fake_anthropic.queue(refusal("salaries are not in the warehouse"))
    out = claude.generate(ctx)
    assert (out.kind, out.sql, out.refusal_reason) == ("refusal", None, "salaries are not in the warehouse")


def test_anthropic_thinking_disabled_and_key_from_env(fake_anthropic, ctx, monkeypatch):
    monkeypatch.setenv("TEAM_CLAUDE_KEY", "env-key")
    settings = AnthropicSettings(model=MODEL, base_url=fake_anthropic.base_url, thinking="disabled",
                                 api_key_env="TEAM_CLAUDE_KEY", max_tokens=512)
    with AnthropicGenerator(settings) as gen:
        out = gen.generate(make_context(prompt=None))
    body = fake_anthropic.last.json
    assert "thinking" not in body and body["max_tokens"] == 512
    assert fake_anthropic.last.headers["authorization"] == "Bearer env-key"
    # no rendered prompt: a default prompt carrying the question and schema is sent
    assert "Question: How many orders" in body["messages"][0]["content"]
    assert out.kind == "sql" and [b["type"] for b in json.loads(out.raw_response)["content"]] == ["text"]


def test_anthropic_429_retry_after_then_success(claude, fake_anthropic, ctx, waits):
    fake_anthropic.queue(rate_limited(2.5), sql("SELECT 1"))
    out, retries = call_with_retries(lambda: claude.generate(ctx), max_retries=3, sleep=waits.append)
    assert out.sql == "SELECT 1" and retries == 1 and fake_anthropic.calls == 2
    assert waits and waits[0] >= 2.5


def test_anthropic_rate_limited_error_fields(claude, fake_anthropic, ctx):
    fake_anthropic.queue(rate_limited(7))
    err = _raises("rate_limited", lambda: claude.generate(ctx))
    assert err.retryable and err.retry_after == 7.0
    assert "rate_limit_error" in err.raw_response


def test_anthropic_500_retried_then_exhausted(claude, fake_anthropic, ctx, waits):
    fake_anthropic.queue(server_error(500), sql("SELECT 2"))
    out, retries = call_with_retries(lambda: claude.generate(ctx), max_retries=2, sleep=waits.append)
    assert out.sql == "SELECT 2" and retries == 1

    fake_anthropic.queue(server_error(500), server_error(529), server_error(503))
    with pytest.raises(ProviderError) as info:
        call_with_retries(lambda: claude.generate(ctx), max_retries=2, sleep=waits.append)
    assert info.value.code == "server_error" and info.value.retries == 2


@pytest.mark.parametrize("behaviour, fragment", [
    (malformed(), "not the expected JSON"),
    (text("SELECT 1 -- plain text, not JSON"), "not the expected JSON"),
    (text('{"kind": "sql", "sql": null}'), "no SQL"),
    (text('{"kind": "maybe"}'), "not the expected JSON"),
])
def test_anthropic_malformed(claude, fake_anthropic, ctx, behaviour, fragment):
    fake_anthropic.queue(behaviour)
    err = _raises("malformed_response", lambda: claude.generate(ctx))
    assert err.retryable and fragment in err.message


def test_anthropic_stop_reason_refusal(claude, fake_anthropic, ctx):
    fake_anthropic.queue(raw(200, {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
                                   "content": [], "stop_reason": "refusal", "stop_sequence": None,
                                   "usage": {"input_tokens": 5, "output_tokens": 0}}))
    out = claude.generate(ctx)
    assert out.kind == "refusal" and "stop_reason=refusal" in out.refusal_reason


def test_anthropic_slow_response_times_out(fake_anthropic, ctx):
    fake_anthropic.queue(sql("SELECT 1", delay=3))
    with AnthropicGenerator(AnthropicSettings(model=MODEL, base_url=fake_anthropic.base_url),
                            api_key="k", timeout_s=0.3) as gen:
        started = time.monotonic()
        err = _raises("provider_timeout", lambda: gen.generate(ctx))
    assert err.retryable and time.monotonic() - started < 2


@pytest.mark.parametrize("code, expected, retryable", [
    (401, "auth_error", False), (403, "auth_error", False), (400, "bad_request", False),
    (404, "bad_request", False), (408, "provider_timeout", True),
])
def test_anthropic_status_mapping(claude, fake_anthropic, ctx, code, expected, retryable):
    fake_anthropic.queue(status(code, "nope"))
    err = _raises(expected, lambda: claude.generate(ctx))
    assert err.retryable is retryable and str(code) in err.message


def test_anthropic_unreachable(ctx):
    settings = AnthropicSettings(model=MODEL, base_url=f"http://127.0.0.1:{_closed_port()}")
    with AnthropicGenerator(settings, api_key="k", timeout_s=2) as gen:
        err = _raises("unreachable", lambda: gen.generate(ctx))
    assert err.retryable


def test_anthropic_missing_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    err = _raises("missing_credentials", lambda: AnthropicGenerator(AnthropicSettings(model=MODEL)))
    assert not err.retryable
    assert "set ANTHROPIC_API_KEY (settings.api_key_env)" in err.message
    monkeypatch.delenv("OTHER_KEY", raising=False)
    err = _raises("missing_credentials",
                  lambda: AnthropicGenerator(AnthropicSettings(model=MODEL, api_key_env="OTHER_KEY")))
    assert "OTHER_KEY" in err.message


# =========================================================================== openai


def _openai(fake, **overrides) -> OpenAIGenerator:
    timeout_s = overrides.pop("timeout_s", 5)
    fields = {"model": "qwen2.5-coder-7b", "base_url": fake.base_url + "/v1", "api_key_env": None}
    fields.update(overrides)
    return OpenAIGenerator(OpenAISettings(**fields), timeout_s=timeout_s)


def test_openai_sql_answer_and_sampling_sent(fake_openai, ctx, monkeypatch):
    monkeypatch.setenv("VLLM_KEY", "vllm-secret")
    with _openai(fake_openai, api_key_env="VLLM_KEY", temperature=0.7, top_p=0.9, seed=42,
                 max_tokens=300) as gen:
        fake_openai.queue(sql("SELECT 3"))
        out = gen.generate(ctx)
    assert (out.kind, out.sql) == ("sql", "SELECT 3")
    assert out.temperature == 0.7 and out.temperature_settable is True
    assert out.model == "qwen2.5-coder-7b" and out.usage.input_tokens == 120
    assert out.usage.output_tokens == 30 and out.usage.latency_ms > 0
    assert json.loads(out.raw_response)["object"] == "chat.completion"
    req = fake_openai.last
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer vllm-secret"
    body = req.json
    assert body["model"] == "qwen2.5-coder-7b"
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.7, 0.9, 42, 300)
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0]["role"] == "system" and '"refusal"' in body["messages"][0]["content"]
    assert body["messages"][1] == {"role": "user", "content": ctx.prompt}


def test_openai_default_temperature_zero_is_sent(fake_openai, ctx):
    with _openai(fake_openai, json_mode=False) as gen:
        gen.generate(ctx)
    body = fake_openai.last.json
    assert body["temperature"] == 0.0
    assert "response_format" not in body and "seed" not in body and "top_p" not in body


@pytest.mark.parametrize("behaviour, expected", [
    (refusal("no cost data"), ("refusal", None, "no cost data")),
    (text('Here you go:\n```json\n{"sql": "SELECT 4", "refusal": null}\n```'), ("sql", "SELECT 4", None)),
    (text('{"kind": "refusal", "sql": null, "refusal_reason": "ambiguous"}'), ("refusal", None, "ambiguous")),
    (text('Answer: {"sql": "SELECT 5"} done.'), ("sql", "SELECT 5", None)),
])
def test_openai_answer_shapes(fake_openai, ctx, behaviour, expected):
    with _openai(fake_openai) as gen:
        fake_openai.queue(behaviour)
        out = gen.generate(ctx)
    assert (out.kind, out.sql, out.refusal_reason) == expected


@pytest.mark.parametrize("behaviour, fragment", [
    (malformed(), "not JSON"),
    (text("SELECT 1"), "no JSON object"),
    (text('{"answer": 42}'), "neither SQL nor a refusal"),
    (raw(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}),
     "no choices"),
])
def test_openai_malformed(fake_openai, ctx, behaviour, fragment):
    with _openai(fake_openai) as gen:
        fake_openai.queue(behaviour)
        err = _raises("malformed_response", lambda: gen.generate(ctx))
    assert err.retryable and fragment in err.message


def test_openai_429_retry_after_then_success(fake_openai, ctx, waits):
    with _openai(fake_openai) as gen:
        fake_openai.queue(rate_limited(3), raw(429, {"error": {"message": "slow"}}, {"retry-after-ms": "1500"}),
                          sql("SELECT 6"))
        out, retries = call_with_retries(lambda: gen.generate(ctx), max_retries=4, sleep=waits.append)
    assert out.sql == "SELECT 6" and retries == 2 and fake_openai.calls == 3
    assert waits[0] >= 3 and waits[1] >= 1.5


def test_openai_429_with_an_hour_of_retry_after_is_not_waited(fake_openai, ctx, waits):
    # a provider asking for an hour: the call ends at once with the reason (never sleeps an hour)
    with _openai(fake_openai) as gen:
        fake_openai.queue(rate_limited(3600), sql("SELECT 6"))
        with pytest.raises(ProviderError) as err:
            call_with_retries(lambda: gen.generate(ctx), max_retries=4, sleep=waits.append)
    assert waits == [] and fake_openai.calls == 1
    assert err.value.code == "rate_limited" and "3600 s" in err.value.gave_up and "60 s cap" in err.value.gave_up


def test_openai_retry_waits_are_bounded_in_all(fake_openai, ctx, waits):
    with _openai(fake_openai) as gen:
        fake_openai.queue(*[rate_limited(50) for _ in range(5)], sql("SELECT 6"))
        with pytest.raises(ProviderError) as err:
            call_with_retries(lambda: gen.generate(ctx), max_retries=5, sleep=waits.append)
    assert waits == [50.0, 50.0] and sum(waits) <= 120 and "in all" in err.value.gave_up


def test_openai_500_retried(fake_openai, ctx, waits):
    with _openai(fake_openai) as gen:
        fake_openai.queue(server_error(502), server_error(500), sql("SELECT 7"))
        out, retries = call_with_retries(lambda: gen.generate(ctx), max_retries=3, sleep=waits.append)
    assert out.sql == "SELECT 7" and retries == 2 and len(waits) == 2


def test_openai_slow_response_times_out(fake_openai, ctx):
    fake_openai.queue(sql("SELECT 1", delay=3))
    with _openai(fake_openai, timeout_s=0.3) as gen:
        err = _raises("provider_timeout", lambda: gen.generate(ctx))
    assert err.retryable


def test_openai_local_server_needs_no_key(fake_openai, ctx, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # base URL without /v1 (LM Studio style): the SDK posts to /chat/completions
    with _openai(fake_openai, base_url=fake_openai.base_url, api_key_env="OPENAI_API_KEY") as gen:
        assert gen.generate(ctx).kind == "sql"
    assert fake_openai.last.path == "/chat/completions"
    assert fake_openai.last.headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"


def test_openai_local_server_rejecting_placeholder_says_which_env(fake_openai, ctx):
    fake_openai.queue(status(401, "invalid api key"))
    with _openai(fake_openai, api_key_env="VLLM_API_KEY") as gen:
        err = _raises("auth_error", lambda: gen.generate(ctx))
    assert "VLLM_API_KEY" in err.message and not err.retryable


def test_openai_missing_key_for_public_host(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    err = _raises("missing_credentials", lambda: OpenAIGenerator(OpenAISettings(model="gpt-4o-mini")))
    assert "set OPENAI_API_KEY (settings.api_key_env)" in err.message
    assert "https://api.openai.com/v1" in err.message


def test_openai_base_url_env(fake_openai, ctx, monkeypatch):
    monkeypatch.delenv("OLLAMA_URL", raising=False)
    settings = OpenAISettings(model="llama3", base_url_env="OLLAMA_URL", api_key_env=None)
    err = _raises("missing_credentials", lambda: OpenAIGenerator(settings))
    assert "set OLLAMA_URL" in err.message
    monkeypatch.setenv("OLLAMA_URL", fake_openai.base_url + "/v1/")
    with OpenAIGenerator(settings) as gen:
        assert gen.generate(ctx).kind == "sql"
    assert fake_openai.last.path == "/v1/chat/completions"


def test_openai_unreachable(ctx):
    settings = OpenAISettings(model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", api_key_env=None)
    with OpenAIGenerator(settings, timeout_s=2) as gen:
        assert _raises("unreachable", lambda: gen.generate(ctx)).retryable


def test_openai_concurrent_calls_overlap(ctx):
    """The fakes serve requests concurrently (what the concurrency benchmark relies on)."""
    from tests.generation.fakes import FakeOpenAI

    with FakeOpenAI(latency=0.2) as fake, _openai(fake) as gen:
        results: list[str] = []
        threads = [threading.Thread(target=lambda: results.append(gen.generate(ctx).kind))
                   for _ in range(8)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    assert results == ["sql"] * 8 and fake.calls == 8
    assert elapsed < 0.2 * 8 / 2, elapsed


# =========================================================================== http


def test_http_sql_answer_and_request(fake_service, ctx, monkeypatch):
    monkeypatch.setenv("TEAM_SQL_AUTH", "Bearer team-token")
    settings = HttpSettings(url=fake_service.base_url + "/api/sql", question_field="q",
                            extra_body={"tenant": "acme", "q": "must not win"},
                            headers={"x-team": "data"}, auth_header_env="TEAM_SQL_AUTH")
    fake_service.queue(sql("SELECT 8"))
    with HttpGenerator(settings, timeout_s=5) as gen:
        out = gen.generate(ctx)
    assert (out.kind, out.sql) == ("sql", "SELECT 8")
    assert out.usage.latency_ms > 0 and json.loads(out.raw_response)["sql"] == "SELECT 8"
    assert gen.name == f"http:127.0.0.1:{fake_service.port}/api/sql"
    req = fake_service.last
    assert req.path == "/api/sql" and req.method == "POST"
    assert req.json == {"tenant": "acme", "q": ctx.question, "case_id": "q01", "as_of": "2025-06-30"}
    assert req.headers["authorization"] == "Bearer team-token" and req.headers["x-team"] == "data"


@pytest.mark.parametrize("body, expected", [
    ({"sql": None, "refusal": "out of scope"}, ("refusal", None, "out of scope")),
    ({"sql": "SELECT 1", "refusal": "but I refuse"}, ("refusal", None, "but I refuse")),
    ({"sql": None, "refusal": None}, ("refusal", None, "the service returned no SQL")),
    ({"sql": "  SELECT 9 ", "refusal": False}, ("sql", "SELECT 9", None)),
])
def test_http_answer_forms(fake_service, ctx, body, expected):
    fake_service.queue(raw(200, body))
    with HttpGenerator(HttpSettings(url=fake_service.base_url)) as gen:
        out = gen.generate(ctx)
    assert (out.kind, out.sql, out.refusal_reason) == expected


def test_http_dotted_paths_with_list_indices(ctx):
    shape = lambda a, r: {"choices": [{"sql": a.sql}], "meta": {"why": a.refusal}}  # noqa: E731
    settings_kw = {"sql_path": "choices.0.sql", "refusal_path": "meta.why"}
    with FakeTextToSqlService(shape=shape) as fake:
        settings = HttpSettings(url=fake.base_url, **settings_kw)
        with HttpGenerator(settings) as gen:
            fake.queue(sql("SELECT 10"), refusal("no such metric"))
            first, second = gen.generate(ctx), gen.generate(ctx)
    assert (first.kind, first.sql) == ("sql", "SELECT 10")
    assert (second.kind, second.refusal_reason) == ("refusal", "no such metric")


def test_http_missing_sql_path_is_malformed(fake_service, ctx):
    fake_service.queue(raw(200, {"query": "SELECT 1"}), malformed(b"<html>oops</html>"),
                       raw(200, {"sql": 42}))
    with HttpGenerator(HttpSettings(url=fake_service.base_url)) as gen:
        first = _raises("malformed_response", lambda: gen.generate(ctx))
        second = _raises("malformed_response", lambda: gen.generate(ctx))
        third = _raises("malformed_response", lambda: gen.generate(ctx))
    assert "no 'sql' (settings.sql_path)" in first.message and first.retryable
    assert "not JSON" in second.message and second.raw_response == "<html>oops</html>"
    assert "is a int" in third.message


def test_http_retries_429_and_500(fake_service, ctx, waits):
    fake_service.queue(rate_limited(1.25), server_error(503), sql("SELECT 11"))
    with HttpGenerator(HttpSettings(url=fake_service.base_url)) as gen:
        out, retries = call_with_retries(lambda: gen.generate(ctx), max_retries=3, sleep=waits.append)
    assert out.sql == "SELECT 11" and retries == 2 and waits[0] >= 1.25


@pytest.mark.parametrize("code, expected", [(401, "auth_error"), (422, "bad_request"),
                                            (500, "server_error"), (429, "rate_limited")])
def test_http_status_mapping(fake_service, ctx, code, expected):
    fake_service.queue(status(code, "service says no"))
    with HttpGenerator(HttpSettings(url=fake_service.base_url)) as gen:
        err = _raises(expected, lambda: gen.generate(ctx))
    assert "service says no" in err.message and str(code) in err.message


def test_http_slow_response_times_out(fake_service, ctx):
    fake_service.queue(sql("SELECT 1", delay=3))
    with HttpGenerator(HttpSettings(url=fake_service.base_url), timeout_s=0.3) as gen:
        assert _raises("provider_timeout", lambda: gen.generate(ctx)).retryable


def test_http_unreachable(ctx):
    with HttpGenerator(HttpSettings(url=f"http://127.0.0.1:{_closed_port()}/sql"), timeout_s=2) as gen:
        assert _raises("unreachable", lambda: gen.generate(ctx)).retryable


def test_http_missing_url_and_env(fake_service, ctx, monkeypatch):
    err = _raises("missing_credentials", lambda: HttpGenerator(HttpSettings()))
    assert "set `url:`" in err.message
    monkeypatch.delenv("TEAM_SQL_URL", raising=False)
    err = _raises("missing_credentials", lambda: HttpGenerator(HttpSettings(url_env="TEAM_SQL_URL")))
    assert "set TEAM_SQL_URL (settings.url_env)" in err.message
    monkeypatch.setenv("TEAM_SQL_URL", fake_service.base_url + "/v2/answer")
    with HttpGenerator(HttpSettings(url_env="TEAM_SQL_URL")) as gen:
        assert gen.generate(ctx).kind == "sql"
    assert fake_service.last.path == "/v2/answer"
    monkeypatch.delenv("TEAM_AUTH", raising=False)
    err = _raises("missing_credentials",
                  lambda: HttpGenerator(HttpSettings(url=fake_service.base_url, auth_header_env="TEAM_AUTH")))
    assert "set TEAM_AUTH" in err.message
    assert _raises("bad_request", lambda: HttpGenerator(HttpSettings(url="ftp://x/y"))).code == "bad_request"
