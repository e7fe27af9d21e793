"""Every attempt records its wall time (retries and their waits included, from an injected
clock), its retries, and the tokens its provider reported — None when none were reported."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sqleval_pipeline.configs import AnthropicSettings, HttpSettings, OpenAISettings, RecordedSettings
from sqleval_pipeline.generation.anthropic_gen import AnthropicGenerator
from sqleval_pipeline.generation.base import GenerationOutput, ProviderError
from sqleval_pipeline.generation.http_gen import HttpGenerator
from sqleval_pipeline.generation.openai_gen import OpenAIGenerator
from sqleval_pipeline.generation.recorded import RecordedGenerator
from sqleval_pipeline.generation.runner import _Counter, make_attempt
from sqleval_pipeline.pipeline.records import Attempt, Grade, Usage, load_records, save_records
from tests.generation.fakes import Answer, FakeTextToSqlService, make_context, rate_limited


class FakeClock:
    """A clock that moves only when told: each provider call costs ``per_call`` seconds and a
    wait costs what it waits (no real time is measured, nothing is timed)."""

    def __init__(self, per_call: float = 0.0):
        self.now = 1000.0
        self.per_call = per_call
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


class ScriptedSystem:
    """Raises the scripted errors in turn, then answers; each call advances the clock."""

    name = "scripted"

    def __init__(self, clock: FakeClock, errors=(), usage: Usage | None = None):
        self.clock = clock
        self.errors = list(errors)
        self.usage = usage
        self.calls = 0

    def generate(self, ctx):
        self.calls += 1
        self.clock.now += self.clock.per_call
        if self.errors:
            raise self.errors.pop(0)
        return GenerationOutput(kind="sql", sql="SELECT 1", usage=self.usage)

    def close(self):
        pass


class Builder:
    """A context builder that needs no catalog."""

    def build(self, case_id, question, run_index):
        return make_context(case_id, run_index, question=question)


CASE = SimpleNamespace(id="q01", question="How many orders were placed last month?")


def attempt(generator, clock: FakeClock, max_retries: int = 3) -> Attempt:
    return make_attempt(CASE, 0, config_version="c1", batch_id="b1", generator=generator,
                        builder=Builder(), max_retries=max_retries, calls=_Counter(),
                        sleep=clock.sleep, clock=clock)


# =========================================================================== the runner's clock


def test_wall_time_includes_retries_and_their_waits():
    clock = FakeClock(per_call=0.25)
    system = ScriptedSystem(clock, errors=[ProviderError("rate_limited", "slow down", retryable=True,
                                                         retry_after=2),
                                           ProviderError("server_error", "500", retryable=True)],
                            usage=Usage(input_tokens=300, output_tokens=20, latency_ms=250.0))
    a = attempt(system, clock)
    assert a.kind == "sql" and a.retries == 2 and system.calls == 3
    assert len(clock.waits) == 2 and clock.waits[0] >= 2
    # three calls of 0.25 s and the two waits, whatever the jitter drew
    assert a.usage.wall_s == pytest.approx(3 * 0.25 + sum(clock.waits))
    # the generator's own numbers are kept beside it: tokens, and its last call's latency
    assert (a.usage.input_tokens, a.usage.output_tokens, a.usage.latency_ms) == (300, 20, 250.0)


def test_an_error_attempt_is_timed_too():
    clock = FakeClock(per_call=1.5)
    system = ScriptedSystem(clock, errors=[ProviderError("timeout", "no answer", retryable=True)] * 3)
    a = attempt(system, clock, max_retries=2)
    assert a.kind == "error" and a.error_code == "timeout" and a.retries == 2
    assert a.usage.wall_s == pytest.approx(3 * 1.5 + sum(clock.waits))
    assert a.usage.input_tokens is None and a.usage.output_tokens is None


def test_a_generator_bug_is_timed_and_reports_no_tokens():
    clock = FakeClock()

    class Broken(ScriptedSystem):
        def generate(self, ctx):
            self.clock.now += 0.75
            raise KeyError("oops")

    a = attempt(Broken(clock), clock)
    assert a.kind == "error" and a.error_code == "harness_error"
    assert a.usage == Usage(wall_s=0.75)


def test_a_system_reporting_no_usage_gets_a_time_and_no_tokens():
    clock = FakeClock(per_call=0.5)
    a = attempt(ScriptedSystem(clock), clock)
    assert a.usage == Usage(wall_s=0.5)  # tokens None, not 0


def test_recorded_answers_are_not_timed_by_the_replay(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"case_id": "q01", "run_index": 0, "sql": "SELECT 1", "latency_ms": 1500,
                    "input_tokens": 900, "output_tokens": 12}) + "\n"
        + json.dumps({"case_id": "q01", "run_index": 1, "sql": "SELECT 2"}) + "\n", encoding="utf-8")
    gen = RecordedGenerator(RecordedSettings(path="a.jsonl"), tmp_path)
    clock = FakeClock()

    def ticking():  # a clock that moves on every read: a timed replay would show it
        clock.now += 7.0
        return clock.now

    a0 = make_attempt(CASE, 0, config_version="c1", batch_id="b1", generator=gen, builder=Builder(),
                      max_retries=0, calls=_Counter(), sleep=clock.sleep, clock=ticking)
    a1 = make_attempt(CASE, 1, config_version="c1", batch_id="b1", generator=gen, builder=Builder(),
                      max_retries=0, calls=_Counter(), sleep=clock.sleep, clock=ticking)
    assert a0.usage == Usage(input_tokens=900, output_tokens=12, latency_ms=1500.0, wall_s=1.5)
    assert a1.usage is None  # the file gives no latency: not recorded, never the replay's


# =========================================================================== real providers


def test_anthropic_tokens_from_the_fakes_usage_block_reach_the_attempt_and_the_scorecard(
        fake_anthropic, tmp_path):
    from sqleval_pipeline.scoring import build_scorecard

    fake_anthropic.queue(Answer(sql="SELECT count(*) FROM marts.fct_orders", usage=(1234, 56)),
                         rate_limited(0.5),
                         Answer(sql="SELECT 2", usage=(2000, 80)))
    clock = FakeClock()
    with AnthropicGenerator(AnthropicSettings(model="claude-test", base_url=fake_anthropic.base_url),
                            api_key="test-key", timeout_s=5) as gen:
        first = attempt(gen, clock)
        second = make_attempt(CASE, 1, config_version="c1", batch_id="b1", generator=gen,
                              builder=Builder(), max_retries=2, calls=_Counter(),
                              sleep=clock.sleep, clock=clock)
    assert (first.usage.input_tokens, first.usage.output_tokens) == (1234, 56)
    assert (second.usage.input_tokens, second.usage.output_tokens) == (2000, 80)
    assert second.retries == 1 and clock.waits and clock.waits[0] >= 0.5
    # the clock moved only by the wait: the real HTTP time is not read (clock injected)
    assert first.usage.wall_s == 0.0 and second.usage.wall_s == pytest.approx(sum(clock.waits))

    path = save_records(tmp_path / "attempts.parquet", [first, second])
    assert [a.usage for a in load_records(path, Attempt)] == [first.usage, second.usage]
    grades = [Grade(config_version="c1", case_id="q01", run_index=r, outcome="CORRECT", reason="match",
                    grader_version="r1", band="answerable", difficulty="top_k", split="dev",
                    cluster="orders") for r in (0, 1)]
    card = build_scorecard(grades, attempts=path, resamples=20)
    assert card.usage.input_tokens.n == 2 and card.usage.input_tokens.mean == (1234 + 2000) / 2
    assert card.usage.output_tokens.median == (56 + 80) / 2
    assert card.usage.retries == 1


def test_openai_tokens_from_the_fakes_usage_block(fake_openai):
    fake_openai.queue(Answer(sql="SELECT 3", usage=(321, 7)))
    clock = FakeClock()
    gen = OpenAIGenerator(OpenAISettings(model="qwen", base_url=fake_openai.base_url + "/v1",
                                         api_key_env=None), timeout_s=5)
    with gen:
        a = attempt(gen, clock)
    assert a.kind == "sql" and (a.usage.input_tokens, a.usage.output_tokens) == (321, 7)
    assert a.usage.wall_s == 0.0 and a.usage.latency_ms > 0


@pytest.mark.parametrize("shape, expected", [
    (lambda a, r: {"sql": a.sql, "usage": {"input_tokens": 410, "output_tokens": 33}}, (410, 33)),
    (lambda a, r: {"sql": a.sql, "usage": {"prompt_tokens": 52, "completion_tokens": 9}}, (52, 9)),
    (lambda a, r: {"data": {"sql": a.sql, "usage": {"input_tokens": 77}}}, (77, None)),
    (lambda a, r: {"sql": a.sql}, (None, None)),
    (lambda a, r: {"sql": a.sql, "usage": {"input_tokens": -1, "output_tokens": True}}, (None, None)),
])
def test_http_tokens_when_the_service_reports_them(shape, expected):
    clock = FakeClock()
    path = "data.sql" if "data" in json.dumps(shape(Answer(sql="S"), None)) else "sql"
    with FakeTextToSqlService(shape=shape) as fake:
        fake.queue(Answer(sql="SELECT 5"))
        with HttpGenerator(HttpSettings(url=fake.base_url + "/ask", sql_path=path), timeout_s=5) as gen:
            a = attempt(gen, clock)
    assert a.kind == "sql" and a.sql == "SELECT 5"
    assert (a.usage.input_tokens, a.usage.output_tokens) == expected
