"""The recorded (JSONL replay) and callable (``package.module:function``) generators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqleval_pipeline.configs import CallableSettings, ConfigError, RecordedSettings
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput, Generator, ProviderError
from sqleval_pipeline.generation.callable_gen import CallableGenerator, CallableTargetError
from sqleval_pipeline.generation.recorded import RecordedAnswersError, RecordedGenerator
from sqleval_pipeline.pipeline.records import Usage
from tests.generation.fakes import make_context

# =========================================================================== recorded


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture
def answers(tmp_path: Path) -> RecordedGenerator:
    write_jsonl(tmp_path / "answers.jsonl", [
        {"case_id": "q01", "run_index": 0, "sql": "SELECT 1", "model": "vendor-x",
         "input_tokens": 10, "output_tokens": 4, "latency_ms": 812.5},
        {"case_id": "q01", "run_index": 1, "refusal": "cannot tell which revenue"},
        "",
        {"case_id": "q02", "run_index": 0, "sql": " SELECT 2 ", "extra": "ignored"},
        {"case_id": "q02", "run_index": 2, "refusal": ""},
    ])
    return RecordedGenerator(RecordedSettings(path="answers.jsonl"), tmp_path)


def test_recorded_replays_sql_and_refusal(answers):
    assert isinstance(answers, Generator) and len(answers) == 4
    out = answers.generate(make_context("q01", 0))
    assert (out.kind, out.sql, out.model) == ("sql", "SELECT 1", "vendor-x")
    assert out.usage == Usage(input_tokens=10, output_tokens=4, latency_ms=812.5, wall_s=0.8125)
    assert json.loads(out.raw_response)["case_id"] == "q01"
    out = answers.generate(make_context("q01", 1))
    assert (out.kind, out.refusal_reason) == ("refusal", "cannot tell which revenue")
    assert answers.generate(make_context("q02", 0)).sql == "SELECT 2"
    assert answers.generate(make_context("q02", 2)).refusal_reason == "no reason given"
    answers.close()


def test_recorded_missing_run_says_which_runs_exist(answers):
    with pytest.raises(ProviderError) as info:
        answers.generate(make_context("q01", 2))
    err = info.value
    assert err.code == "harness_error" and not err.retryable
    assert "no recorded answer for case q01 run 2" in err.message
    assert "only 2 run(s) of this case (run_index 0, 1)" in err.message

    with pytest.raises(ProviderError) as info:
        answers.generate(make_context("q99", 0))
    assert "the case is not in the file" in info.value.message


def test_recorded_coverage_gaps(answers):
    assert answers.runs_for("q02") == [0, 2]
    assert answers.coverage_gaps(["q01", "q02", "q03"], runs=2) == [
        "q02: runs 1 missing (the file has runs 0, 2)",
        "q03: no recorded answer at all",
    ]
    assert answers.coverage_gaps(["q01"], runs=2) == []


@pytest.mark.parametrize("line, fragment", [
    ('{"case_id": "q1", "run_index": 0, "sql": ', ":2: not valid JSON"),
    ('["q1", 0, "SELECT 1"]', ":2: a line is a JSON object"),
    ({"run_index": 0, "sql": "SELECT 1"}, ":2: field 'case_id': missing"),
    ({"case_id": "", "run_index": 0, "sql": "SELECT 1"}, ":2: field 'case_id': must be a non-empty string"),
    ({"case_id": "q1", "sql": "SELECT 1"}, ":2: field 'run_index': missing"),
    ({"case_id": "q1", "run_index": "0", "sql": "SELECT 1"}, ":2: field 'run_index': must be an integer"),
    ({"case_id": "q1", "run_index": True, "sql": "SELECT 1"}, ":2: field 'run_index'"),
    ({"case_id": "q1", "run_index": -1, "sql": "SELECT 1"}, ":2: field 'run_index'"),
    ({"case_id": "q1", "run_index": 1, "sql": "SELECT 1", "refusal": "x"}, ":2: fields 'sql' and 'refusal'"),
    ({"case_id": "q1", "run_index": 1, "answer": "SELECT 1"}, ":2: field 'sql': missing"),
    ({"case_id": "q1", "run_index": 1, "sql": "   "}, ":2: field 'sql': must be a non-empty string"),
    ({"case_id": "q1", "run_index": 1, "refusal": 3}, ":2: field 'refusal': must be a string"),
    ({"case_id": "q1", "run_index": 1, "sql": "SELECT 1", "input_tokens": -3}, ":2: field 'input_tokens'"),
    ({"case_id": "q1", "run_index": 1, "sql": "SELECT 1", "latency_ms": "fast"}, ":2: field 'latency_ms'"),
    ({"case_id": "q1", "run_index": 0, "sql": "SELECT 9"}, ":2: field 'run_index': case q1 run 0 is already recorded at line 1"),
])
def test_recorded_load_errors_name_file_line_field(tmp_path, line, fragment):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"case_id": "q1", "run_index": 0, "sql": "SELECT 1"}, line])
    with pytest.raises(RecordedAnswersError) as info:
        RecordedGenerator(RecordedSettings(path="bad.jsonl"), tmp_path)
    assert str(info.value).startswith(f"{path}:2: ") and fragment in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_recorded_missing_file(tmp_path):
    with pytest.raises(RecordedAnswersError, match="recorded answers file not found"):
        RecordedGenerator(RecordedSettings(path="nope.jsonl"), tmp_path)


def test_recorded_absolute_path_ignores_root(tmp_path):
    path = write_jsonl(tmp_path / "abs.jsonl", [{"case_id": "q1", "run_index": 0, "sql": "SELECT 1"}])
    gen = RecordedGenerator(RecordedSettings(path=str(path)), Path("/nonexistent"))
    assert gen.generate(make_context("q1", 0)).sql == "SELECT 1"


# =========================================================================== callable
# Targets live in this module: "tests.generation.test_recorded_callable:<name>".

TARGET = "tests.generation.test_recorded_callable"
CALLS: list[tuple] = []


def answer_str(question: str, context: GenerationContext, **options):
    CALLS.append((question, context.case_id, options))
    return f"SELECT '{options.get('schema', 'marts')}' AS s -- {context.as_of.isoformat()}"


def answer_none(question, context, **options):
    return None


def answer_blank(question, context, **options):
    return "   "


def answer_dict_sql(question, context, **options):
    return {"sql": "SELECT 3", "model": "rules-v2"}


def answer_dict_refusal(question, context, **options):
    return {"refusal": "no such metric"}


def answer_output(question, context, **options):
    return GenerationOutput(kind="sql", sql="SELECT 4", model="in-house", temperature=0.2,
                            temperature_settable=True)


def answer_output_with_usage(question, context, **options):
    return GenerationOutput(kind="refusal", refusal_reason="ambiguous",
                            usage=Usage(input_tokens=5, latency_ms=12.0))


def answer_bad_dict(question, context, **options):
    return {"query": "SELECT 1"}


def answer_int(question, context, **options):
    return 42


def answer_crash(question, context, **options):
    raise RuntimeError("model server exploded")


def answer_provider_error(question, context, **options):
    raise ProviderError("rate_limited", "upstream quota", retryable=True, retry_after=3)


NOT_A_FUNCTION = 17


def _gen(name: str, **options) -> CallableGenerator:
    return CallableGenerator(CallableSettings(target=f"{TARGET}:{name}", options=options))


def test_callable_str_receives_question_context_and_options():
    CALLS.clear()
    gen = _gen("answer_str", schema="marts")
    ctx = make_context("q05", 1)
    out = gen.generate(ctx)
    assert isinstance(gen, Generator) and gen.name == f"callable:{TARGET}:answer_str"
    assert (out.kind, out.sql) == ("sql", "SELECT 'marts' AS s -- 2025-06-30")
    assert out.usage.latency_ms is not None and out.usage.latency_ms >= 0
    assert CALLS == [(ctx.question, "q05", {"schema": "marts"})]
    gen.close()


@pytest.mark.parametrize("name, expected", [
    ("answer_none", ("refusal", None, "the function returned no SQL")),
    ("answer_blank", ("refusal", None, "the function returned no SQL")),
    ("answer_dict_sql", ("sql", "SELECT 3", None)),
    ("answer_dict_refusal", ("refusal", None, "no such metric")),
    ("answer_output", ("sql", "SELECT 4", None)),
    ("answer_output_with_usage", ("refusal", None, "ambiguous")),
])
def test_callable_return_forms(name, expected):
    out = _gen(name).generate(make_context())
    assert (out.kind, out.sql, out.refusal_reason) == expected
    assert out.usage is not None and out.usage.latency_ms is not None


def test_callable_passes_generation_output_through():
    out = _gen("answer_output").generate(make_context())
    assert (out.model, out.temperature, out.temperature_settable) == ("in-house", 0.2, True)
    assert _gen("answer_dict_sql").generate(make_context()).model == "rules-v2"
    assert _gen("answer_output_with_usage").generate(make_context()).usage == Usage(input_tokens=5, latency_ms=12.0)


@pytest.mark.parametrize("name, code, retryable, fragment", [
    ("answer_bad_dict", "malformed_response", False, "neither SQL nor a refusal"),
    ("answer_int", "malformed_response", False, "returned a int"),
    ("answer_crash", "server_error", True, "raised RuntimeError: model server exploded"),
    ("answer_provider_error", "rate_limited", True, "upstream quota"),
])
def test_callable_failures(name, code, retryable, fragment):
    with pytest.raises(ProviderError) as info:
        _gen(name).generate(make_context())
    assert info.value.code == code and info.value.retryable is retryable
    assert fragment in info.value.message
    if name == "answer_crash":
        assert "Traceback" in info.value.raw_response


@pytest.mark.parametrize("target, fragment", [
    ("no_such_pkg_xyz.mod:fn", "cannot import module 'no_such_pkg_xyz.mod': no module named 'no_such_pkg_xyz'"),
    ("tests.generation.no_such_module:fn", "no module named 'tests.generation.no_such_module'"),
    (f"{TARGET}:missing_function", f"module '{TARGET}' has no attribute 'missing_function'"),
    (f"{TARGET}:NOT_A_FUNCTION", "'NOT_A_FUNCTION' is a int, not a function"),
])
def test_callable_bad_target(target, fragment):
    with pytest.raises(CallableTargetError) as info:
        CallableGenerator(CallableSettings(target=target))
    assert fragment in str(info.value) and target in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_callable_module_failing_on_import(tmp_path, monkeypatch):
    (tmp_path / "broken_sut_mod.py").write_text("import definitely_missing_dep_qq\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CallableTargetError) as info:
        CallableGenerator(CallableSettings(target="broken_sut_mod:answer"))
    assert "no module named 'definitely_missing_dep_qq' (needed while importing 'broken_sut_mod')" in str(info.value)
    (tmp_path / "raising_sut_mod.py").write_text("raise RuntimeError('bad config at import')\n")
    with pytest.raises(CallableTargetError, match="importing module 'raising_sut_mod' raised RuntimeError"):
        CallableGenerator(CallableSettings(target="raising_sut_mod:answer"))


def test_callable_explicit_function():
    gen = CallableGenerator(CallableSettings(target="unused.module:fn"),
                            function=lambda q, ctx, **o: "SELECT 5")
    assert gen.generate(make_context()).sql == "SELECT 5"
