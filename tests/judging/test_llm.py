"""The LLM judge through the real anthropic SDK, against the loopback Messages API fake."""

from __future__ import annotations

import json

import pytest

from sqleval_pipeline.configs import ConfigError
from sqleval_pipeline.generation.base import ProviderError
from sqleval_pipeline.judging.base import Judge
from sqleval_pipeline.judging.llm import (
    DEFAULT_PROMPT_PATH,
    MAX_SAMPLE_ROWS,
    JudgeSetupError,
    LLMJudge,
)
from tests.generation.fakes import malformed, rate_limited, server_error, status, text
from tests.judging.conftest import QUESTION, REFERENCE_SQL, SYSTEM_SQL, make_item

JUDGE_MODEL = "claude-opus-4-1"
GENERATOR_MODEL = "claude-sonnet-4-5-20250929"


def verdict(category: str = "wrong_filter",
            explanation: str = "Filters payment_method = 'upi'; the coded value is 'unified_payments'.") -> object:
    return text(json.dumps({"category": category, "explanation": explanation}))


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def judge(fake_anthropic, waits):
    with LLMJudge(JUDGE_MODEL, api_key="test-key", base_url=fake_anthropic.base_url, timeout_s=5,
                  generator_model=GENERATOR_MODEL, sleep=waits.append) as j:
        yield j


def test_success_request_and_diagnosis(judge, fake_anthropic):
    fake_anthropic.queue(verdict())
    item = make_item(rows=10)
    d = judge.diagnose(item)

    assert isinstance(judge, Judge)
    assert d.key == ("cfgv1", "q07", 0)
    assert d.category == "wrong_filter" and "unified_payments" in d.explanation
    assert d.judge == f"llm:{JUDGE_MODEL}" == judge.name and d.judge_version == judge.version

    req = fake_anthropic.last
    assert fake_anthropic.calls == 1 and req.path == "/v1/messages"
    assert req.headers["authorization"] == "Bearer test-key"
    body = req.json
    assert body["model"] == JUDGE_MODEL
    assert body["thinking"] == {"type": "adaptive"}
    assert "temperature" not in body
    schema = body["output_config"]["format"]["schema"]
    assert set(schema["properties"]) == {"category", "explanation"}
    assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"

    prompt = body["messages"][0]["content"]
    assert QUESTION in prompt and REFERENCE_SQL in prompt and SYSTEM_SQL in prompt
    assert "result_mismatch:values" in prompt and "Grade: WRONG" in prompt
    # a small sample only: at most 5 expected and 5 returned rows out of 10 each
    assert prompt.count("EXP-ROW-") == MAX_SAMPLE_ROWS and prompt.count("GOT-ROW-") == MAX_SAMPLE_ROWS
    assert "EXP-ROW-05" not in prompt and "GOT-ROW-09" not in prompt
    assert "10 row(s), first 5 shown" in prompt
    for category in ("wrong_table", "wrong_filter", "wrong_metric", "wrong_grain",
                     "ambiguous_question", "harness_bug"):
        assert f"- {category}: " in prompt
    assert prompt == judge.render(item)


def test_prompt_for_a_refusal_and_few_rows(judge):
    prompt = judge.render(make_item(kind="refusal", outcome="DEFERRED_WRONGLY", rows=2))
    assert "(declined to answer) reason given: payment method UPI is not in the schema" in prompt
    assert SYSTEM_SQL not in prompt and "GOT-ROW-" not in prompt
    assert prompt.count("EXP-ROW-") == 2 and "2 row(s)\n" in prompt and "row(s), first" not in prompt


def test_rate_limited_then_success(judge, fake_anthropic, waits):
    fake_anthropic.queue(rate_limited(0.01), verdict("wrong_metric", "Sums gross, not net."))
    d = judge.diagnose(make_item())
    assert d.category == "wrong_metric" and fake_anthropic.calls == 2
    assert len(waits) == 1 and waits[0] >= 0.01


def test_server_errors_exhaust_retries(judge, fake_anthropic, waits):
    fake_anthropic.queue(*(server_error(500) for _ in range(4)))
    with pytest.raises(ProviderError) as info:
        judge.diagnose(make_item())
    assert info.value.code == "server_error" and info.value.retries == 3
    assert fake_anthropic.calls == 4 and len(waits) == 3


@pytest.mark.parametrize("behaviour", [
    text("It is clearly a wrong filter."),                                  # prose, not JSON
    text(json.dumps({"category": "wrong_colour", "explanation": "x"})),     # not one of the six
    text(json.dumps({"category": "wrong_table"})),                          # no explanation
    text(json.dumps({"category": "wrong_table", "explanation": "  "})),     # empty explanation
    malformed(),                                                            # body is not JSON
])
def test_malformed_output(fake_anthropic, behaviour):
    fake_anthropic.queue(behaviour)
    with LLMJudge(JUDGE_MODEL, api_key="k", base_url=fake_anthropic.base_url, max_retries=0) as j:
        with pytest.raises(ProviderError) as info:
            j.diagnose(make_item())
    assert info.value.code == "malformed_response" and info.value.retryable


def test_auth_error_is_not_retried(judge, fake_anthropic, waits):
    fake_anthropic.queue(status(401, "invalid x-api-key"))
    with pytest.raises(ProviderError) as info:
        judge.diagnose(make_item())
    assert info.value.code == "auth_error" and "ANTHROPIC_API_KEY" in info.value.message
    assert fake_anthropic.calls == 1 and waits == []


def test_missing_api_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError) as info:
        LLMJudge(JUDGE_MODEL)
    assert info.value.code == "missing_credentials" and not info.value.retryable
    assert "ANTHROPIC_API_KEY" in info.value.message


def test_api_key_from_environment(fake_anthropic, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    fake_anthropic.queue(verdict())
    with LLMJudge(JUDGE_MODEL, base_url=fake_anthropic.base_url) as j:
        j.diagnose(make_item())
    assert fake_anthropic.last.headers["authorization"] == "Bearer env-key"


@pytest.mark.parametrize("generator", [JUDGE_MODEL, f"{JUDGE_MODEL}-20250805",
                                       f"anthropic:{JUDGE_MODEL.upper()}"])
def test_refuses_to_judge_its_own_model(generator):
    with pytest.raises(JudgeSetupError, match="self-preference") as info:
        LLMJudge(JUDGE_MODEL, api_key="k", generator_model=generator)
    assert isinstance(info.value, ConfigError)


def test_version_follows_prompt_text_and_model(tmp_path):
    prompt = tmp_path / "judge_test.j2"
    prompt.write_text(DEFAULT_PROMPT_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    v1 = LLMJudge(JUDGE_MODEL, api_key="k", prompt_path=prompt).version
    assert v1 == LLMJudge(JUDGE_MODEL, api_key="k").version  # same text, same version
    assert v1 != LLMJudge("claude-haiku-4-5", api_key="k", prompt_path=prompt).version
    prompt.write_text(prompt.read_text(encoding="utf-8") + "\nBe brief.\n", encoding="utf-8")
    v2 = LLMJudge(JUDGE_MODEL, api_key="k", prompt_path=prompt).version
    assert v2 != v1


def test_bad_prompt_file(tmp_path):
    with pytest.raises(JudgeSetupError, match="cannot read"):
        LLMJudge(JUDGE_MODEL, api_key="k", prompt_path=tmp_path / "missing.j2")
    bad = tmp_path / "bad.j2"
    bad.write_text("Question: {{ question \n", encoding="utf-8")
    with pytest.raises(JudgeSetupError, match=r"bad\.j2:\d+"):
        LLMJudge(JUDGE_MODEL, api_key="k", prompt_path=bad)


def test_only_failed_attempts_are_judged(judge, fake_anthropic):
    with pytest.raises(ValueError, match="only failed attempts"):
        judge.diagnose(make_item(outcome="CORRECT"))
    with pytest.raises(ValueError, match="only failed attempts"):
        judge.diagnose_all([make_item("q01"), make_item("q02", outcome="ERROR")])
    assert fake_anthropic.calls == 0


def test_diagnose_all_collects_failures_in_order(judge, fake_anthropic):
    def answer(req):
        prompt = req.json["messages"][0]["content"]
        if "Case: q02 " in prompt:
            return status(400, "prompt is too long")
        return verdict()

    fake_anthropic.default = answer
    items = [make_item(f"q0{i}") for i in range(1, 6)]
    diagnoses, failures = judge.diagnose_all(items, concurrency=3)
    assert [d.case_id for d in diagnoses] == ["q01", "q03", "q04", "q05"]
    assert [(key, err.code) for key, err in failures] == [(("cfgv1", "q02", 0), "bad_request")]
    assert fake_anthropic.calls == 5
    assert judge.diagnose_all([]) == ([], [])


def test_client_safe_mode_sends_no_row_value_and_stores_what_it_sent(fake_anthropic, waits):
    """judge_sees_rows: false — the request body (what leaves the machine) holds the question,
    both SQL texts, column names and row counts, and not one row value; the stored prompt is
    exactly what was sent; the mode is part of the judge's version."""
    item = make_item(rows=7)
    # a mismatch note quoting values, as the grader writes them
    item = item.model_copy(update={"grade": item.grade.model_copy(update={
        "mismatch": "missing e.g. ('EXP-ROW-03', 1003.50); unexpected e.g. ('GOT-ROW-01', 8.0)"})})
    with LLMJudge(JUDGE_MODEL, api_key="k", base_url=fake_anthropic.base_url, timeout_s=5,
                  generator_model=GENERATOR_MODEL, sleep=waits.append, sees_rows=False) as safe, \
         LLMJudge(JUDGE_MODEL, api_key="k", base_url=fake_anthropic.base_url, timeout_s=5,
                  generator_model=GENERATOR_MODEL, sleep=waits.append) as full:
        fake_anthropic.queue(verdict())
        d = safe.diagnose(item)
        sent = json.dumps(fake_anthropic.last.json)
        assert safe.version != full.version
    for marker in ("EXP-ROW", "GOT-ROW", "1003.50", "1000.50"):
        assert marker not in sent, marker
    assert QUESTION in d.prompt and REFERENCE_SQL in d.prompt and SYSTEM_SQL in d.prompt
    assert '["day", "revenue_inr"]' in d.prompt and "7 row(s)" in d.prompt
    assert fake_anthropic.last.json["messages"][0]["content"] == d.prompt


def test_verdicts_are_cached_by_content(fake_anthropic, waits, tmp_path):
    """A second judge over the same failure (a re-run, another batch) makes no call; a
    different failure does."""
    kw = dict(api_key="k", base_url=fake_anthropic.base_url, timeout_s=5,
              generator_model=GENERATOR_MODEL, sleep=waits.append, cache_dir=tmp_path)
    with LLMJudge(JUDGE_MODEL, **kw) as first:
        fake_anthropic.queue(verdict("wrong_metric", "summed the gross column"))
        a = first.diagnose(make_item())
    with LLMJudge(JUDGE_MODEL, **kw) as again:
        b = again.diagnose(make_item(config_version="cfgv2"))  # same content, another version
        assert fake_anthropic.calls == 1
        assert (b.category, b.explanation) == (a.category, a.explanation)
        assert b.config_version == "cfgv2"
        fake_anthropic.queue(verdict("wrong_grain", "groups by year"))
        c = again.diagnose(make_item(rows=3))  # other rows: another prompt
    assert fake_anthropic.calls == 2 and c.category == "wrong_grain"
