"""The LLM judge (docs/configurations.md, judges): Claude diagnoses a failed attempt through ``messages.parse``.

The judge renders the published, versioned prompt ``judge_v1.j2`` (package data, ``sqleval_pipeline/data/prompts``) with what a
reviewer needs — the question, the reference SQL, the system's SQL (or its refusal reason),
the guarded execution, the grade's outcome, reason and mismatch note, a *small* excerpt of the
expected and returned rows (at most :data:`MAX_SAMPLE_ROWS` each: the judge sees questions and
SQL, very little row data) and the six categories with their help text — and asks the pinned
judge model for a :class:`JudgeVerdict` (``category``, ``explanation``) with adaptive thinking.
Anthropic 2.14 has no temperature argument; none is sent.

Guarantees:

- **No self-preference**: the judge refuses to be built when its model is the model that
  generated the SQL (``generator_model``), alias/dated forms included.
- **Pinned and versioned**: ``name`` is ``"llm:<model>"``; ``version`` hashes the prompt
  file's text, the model id, the category help text and the row-sample size, so editing the
  prompt yields a new version. Both are stored on every :class:`Diagnosis`.
- **No made-up verdicts**: a judge that cannot answer raises :class:`ProviderError` (the SDK's
  errors are mapped by :mod:`sqleval_pipeline.providers.anthropic`, as for the Claude
  generator; retryable ones are retried with :func:`call_with_retries`). The caller records
  *no* diagnosis for that attempt.

>>> judge = LLMJudge("claude-opus-4-1", generator_model="claude-sonnet-4-5",
...                  api_key="sk-ant-...")                                   # doctest: +SKIP
>>> d = judge.diagnose(item)                                                 # doctest: +SKIP
>>> d.category, d.judge                                                      # doctest: +SKIP
('wrong_filter', 'llm:claude-opus-4-1')
>>> diagnoses, failed = judge.diagnose_all(items, concurrency=4)             # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, Field

from sqleval_pipeline.data import resource
from sqleval_pipeline.configs import ConfigError
from sqleval_pipeline.judging.base import CATEGORY_HELP, FAILED_OUTCOMES, JudgeInput, is_failure
from sqleval_pipeline.providers.anthropic import (
    anthropic_client,
    no_parsed_output,
    parse_mapping_errors,
)
from sqleval_pipeline.providers.env import env_value
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.providers.retry import call_with_retries
from sqleval_pipeline.pipeline.records import FAILURE_CATEGORIES, Diagnosis, Execution, FailureCategory
from sqleval_pipeline.textfiles import write_atomically

__all__ = [
    "DEFAULT_PROMPT_PATH", "MAX_SAMPLE_ROWS", "API_KEY_ENV", "JudgeSetupError", "JudgeVerdict",
    "LLMJudge", "same_model", "judge_version",
]

#: the published judge prompt (versioned file; a new prompt gets a new file name)
DEFAULT_PROMPT_PATH = resource("prompts", "judge_v1.j2")
#: at most this many expected rows and this many returned rows reach the judge
MAX_SAMPLE_ROWS = 5
#: the environment variable holding the Anthropic key
API_KEY_ENV = "ANTHROPIC_API_KEY"
#: longest cell value and mismatch note shown to the judge (longer text is cut and marked)
MAX_CELL_CHARS = 80
MAX_MISMATCH_CHARS = 600

AttemptKeyTuple = tuple[str, str, int]


class JudgeSetupError(ConfigError):
    """The judge cannot be built as configured (e.g. it would judge its own model's SQL)."""


class JudgeVerdict(BaseModel):
    """The judge model's structured answer (the ``output_format`` of ``messages.parse``)."""

    category: FailureCategory = Field(description="the one failure category that fits best")
    explanation: str = Field(description="two to four sentences naming the clause at fault "
                                         "and what the reference does instead")


# --------------------------------------------------------------------------- helpers

_DATE_SUFFIX_RE = re.compile(r"(-\d{8}|-latest|@\d{8})$")


def _canonical_model(model: str) -> str:
    text = model.strip().lower()
    if ":" in text:  # a generator name such as "anthropic:claude-…"
        text = text.split(":", 1)[1]
    return _DATE_SUFFIX_RE.sub("", text)


def same_model(a: str | None, b: str | None) -> bool:
    """True when two model ids name the same model (case, provider prefix, date suffix ignored).

    >>> same_model("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    True
    >>> same_model("anthropic:Claude-Opus-4-1", "claude-opus-4-1")
    True
    >>> same_model("claude-opus-4-1", "claude-sonnet-4-5"), same_model("x", None)
    (False, False)
    """
    if not a or not b:
        return False
    return _canonical_model(a) == _canonical_model(b)


def judge_version(prompt_text: str, model: str) -> str:
    """The judge's version: a hash of everything that decides what the judge is asked.

    The prompt template text, the model id, the category help text and the row-sample size
    go into the hash; ``judge_v1.j2`` style names stay readable as a prefix elsewhere.

    >>> v = judge_version("Classify: {{ question }}", "claude-opus-4-1")
    >>> len(v), v == judge_version("Classify: {{ question }}", "claude-opus-4-1")
    (16, True)
    >>> v != judge_version("Classify the failure: {{ question }}", "claude-opus-4-1")
    True
    """
    material = json.dumps(
        {"prompt": prompt_text, "model": model, "categories": CATEGORY_HELP,
         "max_sample_rows": MAX_SAMPLE_ROWS},
        sort_keys=True, ensure_ascii=False,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]


def _cut(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (cut text ends with …)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[: MAX_CELL_CHARS - 1] + "…"
    return value


def _sample(label: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """At most :data:`MAX_SAMPLE_ROWS` rows, each one JSON line (values already JSON-safe)."""
    shown = [json.dumps([_cell(v) for v in row], ensure_ascii=False, default=str)
             for row in rows[:MAX_SAMPLE_ROWS]]
    return {"label": label, "columns": json.dumps(list(columns), ensure_ascii=False),
            "rows": shown, "total": len(rows), "shown": len(shown)}


def _shape(label: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """A result described without its values (client-safe mode): column names and row count."""
    return {"label": f"{label} (row values withheld)",
            "columns": json.dumps(list(columns), ensure_ascii=False), "rows": [],
            "total": len(rows), "shown": 0}


def _execution_text(execution: Execution | None, with_messages: bool = True) -> str | None:
    if execution is None:
        return None
    if not with_messages:  # codes only: a guard or database message may quote values
        if execution.status == "refused":
            return f"refused by the {execution.layer} guard ({execution.reason})"
        if execution.status == "timeout":
            return "stopped by the execution time cap"
        if execution.status == "error":
            return f"failed ({execution.error_source} error {execution.error_code or ''})".replace(" )", ")")
    if execution.status == "ok":
        n = execution.result.row_count if execution.result is not None else 0
        return f"ran, returned {n} row(s)" + (" (truncated by the result cap)" if execution.truncated else "")
    if execution.status == "refused":
        detail = f": {execution.message}" if execution.message else ""
        return f"refused by the {execution.layer} guard ({execution.reason}){detail}"
    if execution.status == "timeout":
        return "stopped by the execution time cap" + (f": {execution.message}" if execution.message else "")
    code = f" {execution.error_code}" if execution.error_code else ""
    msg = f": {_cut(execution.error_message, MAX_MISMATCH_CHARS)}" if execution.error_message else ""
    return f"failed ({execution.error_source} error{code}){msg}"


# --------------------------------------------------------------------------- the judge


class LLMJudge:
    """Claude as a failure judge (see the module docstring).

    Args:
        model: the pinned judge model id, e.g. ``"claude-opus-4-1"``.
        prompt_path: the versioned Jinja2 prompt (default ``judge_v1.j2`` (package data, ``sqleval_pipeline/data/prompts``)).
        api_key: the Anthropic key; default ``$ANTHROPIC_API_KEY``.
        base_url: another endpoint (a gateway, or a loopback fake in tests).
        timeout_s: per-call timeout in seconds.
        max_retries: retries of retryable errors (429, 5xx, timeouts, malformed answers).
        generator_model: the model that generated the SQL under review; the judge refuses to
            be that model (self-preference bias).
        max_tokens: the answer budget, adaptive thinking included.
        dialect: the SQL dialect named in the prompt.
        base_delay: first backoff ceiling in seconds (see :func:`call_with_retries`).
        sleep: how to wait between retries (tests pass a recorder).

    Raises:
        JudgeSetupError: the judge model is the generating model, or the prompt is unreadable.
        ProviderError: ``missing_credentials`` when no API key is given nor in the environment.

    >>> LLMJudge("claude-sonnet-4-5", generator_model="claude-sonnet-4-5-20250929",
    ...          api_key="k")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    JudgeSetupError: ...
    """

    def __init__(self, model: str, *, prompt_path: Path = DEFAULT_PROMPT_PATH,
                 api_key: str | None = None, base_url: str | None = None, timeout_s: float = 60,
                 max_retries: int = 3, generator_model: str | None = None,
                 max_tokens: int = 4096, dialect: str = "DuckDB", base_delay: float = 0.5,
                 sleep: Callable[[float], object] = time.sleep, sees_rows: bool = True,
                 cache_dir: Path | None = None) -> None:
        if not model or not model.strip():
            raise JudgeSetupError("the LLM judge needs a model id (configuration field judge_model)")
        if same_model(model, generator_model):
            raise JudgeSetupError(
                f"the judge model {model!r} is the model that generated the SQL "
                f"({generator_model!r}); a model judging its own answers is biased in their "
                "favour (self-preference). Set judge_model to a different model."
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model.strip()
        self.generator_model = generator_model
        self.prompt_path = Path(prompt_path)
        try:
            self.prompt_text = self.prompt_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise JudgeSetupError(f"cannot read the judge prompt {self.prompt_path}: {exc}") from exc
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False,
                                 keep_trailing_newline=True)
        try:
            self._template = env.from_string(self.prompt_text)
        except jinja2.TemplateSyntaxError as exc:
            raise JudgeSetupError(
                f"{self.prompt_path}:{exc.lineno}: the judge prompt is not valid Jinja2: {exc.message}"
            ) from exc
        self.name = f"llm:{self.model}"
        #: False: client-safe mode — no row value leaves the machine (see :meth:`render`)
        self.sees_rows = sees_rows
        self.version = judge_version(self.prompt_text + ("" if sees_rows else "\n[rows withheld]"),
                                     self.model)
        #: verdicts by content (model, version, prompt): a re-run on the same failure is free
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.dialect = dialect
        self.timeout_s = timeout_s
        self.base_delay = base_delay
        self._sleep = sleep
        self._client = anthropic_client(
            api_key or env_value(API_KEY_ENV), timeout_s=timeout_s, base_url=base_url,
            missing_key_message=(
                f"the LLM judge needs an Anthropic API key: set {API_KEY_ENV} in the environment "
                f"(e.g. `export {API_KEY_ENV}=sk-ant-...`) or use the rules judge (judge: rules)"),
        )

    # -- public ---------------------------------------------------------------------------

    def render(self, item: JudgeInput) -> str:
        """The prompt the judge model receives for ``item`` (also useful for review).

        Raises:
            ValueError: the attempt did not fail (only WRONG and DEFERRED_WRONGLY are judged)
                or its records belong to different attempts.
        """
        _check_item(item)
        case, attempt, grade = item.case, item.attempt, item.grade
        samples = []
        sample = _sample if self.sees_rows else _shape
        if case.expected is not None:
            samples.append(sample("Expected rows (reference result)", case.expected.columns,
                                  case.expected.rows))
        if item.execution is not None and item.execution.result is not None:
            got = item.execution.result.to_json()
            samples.append(sample("Rows the system's SQL returned", got["columns"], got["rows"]))
        mismatch = _cut(grade.mismatch, MAX_MISMATCH_CHARS) if grade.mismatch else None
        execution = _execution_text(item.execution)
        if not self.sees_rows:  # the grader's note and error messages quote values
            mismatch = None
            execution = _execution_text(item.execution, with_messages=False)
        return self._template.render(
            dialect=self.dialect,
            case_id=case.id, question=case.question, difficulty=case.difficulty, band=case.band,
            traps=list(case.traps), notes=case.notes,
            reference_sql=case.reference_sql, alternative_sqls=list(case.alternative_sqls),
            answer_kind=attempt.kind, system_sql=attempt.sql,
            refusal_reason=attempt.refusal_reason or "no reason given",
            execution=execution,
            outcome=grade.outcome, grade_reason=grade.reason, mismatch=mismatch,
            samples=samples, max_rows=MAX_SAMPLE_ROWS,
            categories=[{"name": c, "help": CATEGORY_HELP[c]} for c in FAILURE_CATEGORIES],
        )

    def diagnose(self, item: JudgeInput) -> Diagnosis:
        """Diagnose one failed attempt, retrying retryable provider errors.

        Raises:
            ProviderError: no verdict could be obtained (``error.retries`` says how many
                retries were made); record no diagnosis for the attempt.
            ValueError: the attempt did not fail, or its records do not belong together.
        """
        prompt = self.render(item)
        verdict = self._cached(prompt)
        if verdict is None:
            verdict, _ = call_with_retries(lambda: self._ask(prompt), max_retries=self.max_retries,
                                           base_delay=self.base_delay, sleep=self._sleep)
            self._remember(prompt, verdict)
        return self._diagnosis(item, verdict, prompt)

    def _diagnosis(self, item: JudgeInput, verdict: JudgeVerdict, prompt: str) -> Diagnosis:
        config_version, case_id, run_index = item.grade.key
        return Diagnosis(config_version=config_version, case_id=case_id, run_index=run_index,
                         category=verdict.category, explanation=verdict.explanation.strip(),
                         judge=self.name, judge_version=self.version, prompt=prompt)

    def _cache_file(self, prompt: str) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(f"{self.model}\n{self.version}\n{prompt}".encode()).hexdigest()
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cached(self, prompt: str) -> JudgeVerdict | None:
        f = self._cache_file(prompt)
        if f is None or not f.exists():
            return None
        try:
            return JudgeVerdict.model_validate_json(f.read_text(encoding="utf-8"))
        except ValueError:
            return None  # a damaged entry is asked again

    def _remember(self, prompt: str, verdict: JudgeVerdict) -> None:
        f = self._cache_file(prompt)
        if f is None:
            return
        write_atomically(f, verdict.model_dump_json())

    def diagnose_all(self, items: Iterable[JudgeInput], *, concurrency: int = 4
                     ) -> tuple[list[Diagnosis], list[tuple[AttemptKeyTuple, ProviderError]]]:
        """Diagnose many attempts concurrently; ``(diagnoses, failures)`` in input order.

        ``failures`` pairs each attempt key that got no verdict with its :class:`ProviderError`.
        Every item is checked before the first call, so a non-failed attempt (ValueError)
        costs no API call.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        batch = list(items)
        for item in batch:
            _check_item(item)
        if not batch:
            return [], []

        # identical failures (the same answer in several runs) are one question to the model
        prompts = [self.render(item) for item in batch]
        distinct = list(dict.fromkeys(prompts))

        def one(prompt: str) -> JudgeVerdict | ProviderError:
            cached = self._cached(prompt)
            if cached is not None:
                return cached
            try:
                verdict, _ = call_with_retries(lambda: self._ask(prompt), max_retries=self.max_retries,
                                               base_delay=self.base_delay, sleep=self._sleep)
            except ProviderError as exc:
                return exc
            self._remember(prompt, verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=min(concurrency, len(distinct)),
                                thread_name_prefix="llm-judge") as pool:
            answers = dict(zip(distinct, pool.map(one, distinct), strict=True))
        results = [answers[p] if isinstance(answers[p], ProviderError)
                   else self._diagnosis(item, answers[p], p) for item, p in zip(batch, prompts, strict=True)]
        diagnoses: list[Diagnosis] = []
        failures: list[tuple[AttemptKeyTuple, ProviderError]] = []
        for item, result in zip(batch, results, strict=True):
            if isinstance(result, ProviderError):
                failures.append((item.grade.key, result))
            else:
                diagnoses.append(result)
        return diagnoses, failures

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> LLMJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LLMJudge(model={self.model!r}, version={self.version!r}, prompt={self.prompt_path.name!r})"

    # -- internals ------------------------------------------------------------------------

    def _ask(self, prompt: str) -> JudgeVerdict:
        """One ``messages.parse`` call; SDK errors become :class:`ProviderError` codes."""
        message = parse_mapping_errors(
            self._client,
            {"model": self.model, "max_tokens": self.max_tokens,
             "messages": [{"role": "user", "content": prompt}], "output_format": JudgeVerdict,
             "thinking": {"type": "adaptive"}},
            timeout_s=self.timeout_s, credential_hint=API_KEY_ENV, subject="the judge",
        )
        verdict: JudgeVerdict | None = message.parsed_output
        raw = truncate_raw(message.to_json(indent=None))
        if verdict is None:
            if message.stop_reason == "refusal":
                raise ProviderError("malformed_response",
                                    "the judge model declined to answer (stop_reason=refusal)",
                                    raw_response=raw)
            raise no_parsed_output("the judge returned no JSON verdict", message.stop_reason, raw)
        if not verdict.explanation.strip():
            raise ProviderError("malformed_response", "the judge gave a category but no explanation",
                                retryable=True, raw_response=raw)
        return verdict


def _check_item(item: JudgeInput) -> None:
    if not is_failure(item.grade):
        raise ValueError(
            f"attempt {item.grade.key} has outcome {item.grade.outcome}: only failed attempts "
            f"({', '.join(sorted(FAILED_OUTCOMES))}) are diagnosed; filter with is_failure()"
        )
    if item.attempt.key != item.grade.key or (
        item.execution is not None and item.execution.key != item.grade.key
    ) or item.case.id != item.grade.case_id:
        raise ValueError(
            f"the judge input mixes attempts: case {item.case.id}, attempt {item.attempt.key}, "
            f"execution {item.execution.key if item.execution else None}, grade {item.grade.key}"
        )
