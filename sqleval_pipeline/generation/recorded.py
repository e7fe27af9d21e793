"""Replay answers exported from another system: JSON Lines keyed by case id and run index.

One answer per line, either SQL or a refusal::

    {"case_id": "q01", "run_index": 0, "sql": "SELECT count(*) FROM marts.fct_orders"}
    {"case_id": "q02", "run_index": 0, "refusal": "salaries are not in the warehouse"}

Optional fields are kept: ``model`` (str), ``latency_ms`` (number: the answer's latency, which
the scorecard reports; without it the latency is not recorded), ``input_tokens`` /
``output_tokens`` (int: the scorecard's tokens and cost). Other keys are ignored. The file is loaded and
checked when the generator is built; an error names ``file:line`` and the field.
A (case, run) the file lacks is a non-retryable ``harness_error`` saying which runs the file
does have for that case.

>>> import json, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.jsonl").write_text(json.dumps({"case_id": "q1", "run_index": 0, "sql": "SELECT 1"}) + "\\n")
>>> from sqleval_pipeline.configs import RecordedSettings
>>> gen = RecordedGenerator(RecordedSettings(path="a.jsonl"), root=d)
>>> gen.runs_for("q1"), gen.coverage_gaps(["q1"], runs=2)
([0], ['q1: runs 1 missing (the file has runs 0)'])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqleval_pipeline.configs import RecordedSettings
from sqleval_pipeline.generation._common import GeneratorSetupError
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.providers.errors import ProviderError
from sqleval_pipeline.pipeline.records import Usage
from sqleval_pipeline.textfiles import BadJsonLine, json_lines


class RecordedAnswersError(GeneratorSetupError):
    """The recorded-answers file is missing or invalid; the message names file:line and field."""


@dataclass(frozen=True)
class RecordedAnswer:
    """One replayed answer and where it came from."""

    case_id: str
    run_index: int
    sql: str | None
    refusal: str | None
    line: int
    text: str
    model: str | None = None
    usage: Usage | None = None


class RecordedGenerator:
    """Replays a JSONL file of answers.

    Args:
        settings: the configuration's ``generator`` block (``path``, relative to ``root``).
        root: the directory ``settings.path`` is relative to (the repository root by default;
            an absolute ``path`` ignores it).

    Raises:
        RecordedAnswersError: the file does not exist, or a line is not a valid answer.
    """

    #: answers from memory, without waiting on I/O: the runner calls it inline
    in_process = True
    #: no model provider is called: its answers are not counted as provider calls
    calls_provider = False
    #: the answers were made elsewhere: the runner does not time the replay; an answer's
    #: latency is the file's ``latency_ms`` (``usage.wall_s``), else not recorded
    live = False

    def __init__(self, settings: RecordedSettings, root: Path) -> None:
        self.settings = settings
        self.path = Path(root) / settings.path
        self.name = f"recorded:{settings.path}"
        self._answers: dict[tuple[str, int], RecordedAnswer] = {}
        self._runs: dict[str, list[int]] = {}
        for answer in load_recorded(self.path):
            self._answers[(answer.case_id, answer.run_index)] = answer
            self._runs.setdefault(answer.case_id, []).append(answer.run_index)
        for runs in self._runs.values():
            runs.sort()

    def __len__(self) -> int:
        return len(self._answers)

    def runs_for(self, case_id: str) -> list[int]:
        """The run indices the file has for ``case_id`` (sorted; empty if none)."""
        return list(self._runs.get(case_id, []))

    def coverage_gaps(self, case_ids: Iterable[str], runs: int) -> list[str]:
        """One readable line per case lacking any of runs ``0..runs-1`` (empty when complete).

        Lets a runner refuse to start a replay that would end in ERROR attempts.
        """
        gaps = []
        for case_id in case_ids:
            have = self._runs.get(case_id, [])
            missing = [r for r in range(runs) if r not in have]
            if not missing:
                continue
            if not have:
                gaps.append(f"{case_id}: no recorded answer at all")
            else:
                gaps.append(f"{case_id}: runs {_join(missing)} missing (the file has runs {_join(have)})")
        return gaps

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """The recorded answer for ``(ctx.case_id, ctx.run_index)``."""
        answer = self._answers.get((ctx.case_id, ctx.run_index))
        if answer is None:
            have = self._runs.get(ctx.case_id)
            if have:
                detail = (f"the file has answers for only {len(have)} run(s) of this case "
                          f"(run_index {_join(have)})")
            else:
                detail = "the case is not in the file"
            raise ProviderError(
                "harness_error",
                f"no recorded answer for case {ctx.case_id} run {ctx.run_index} in {self.path}: "
                f"{detail}",
                retryable=False,
            )
        # the file's numbers only: replaying takes microseconds, which says nothing about how
        # long the system took (a missing latency stays None, never a made-up one)
        usage = answer.usage
        if usage is not None and usage.latency_ms is not None:
            usage = usage.model_copy(update={"wall_s": usage.latency_ms / 1000.0})
        common = {"usage": usage, "raw_response": answer.text, "model": answer.model}
        if answer.refusal is not None:
            return GenerationOutput(kind="refusal", refusal_reason=answer.refusal, **common)
        return GenerationOutput(kind="sql", sql=answer.sql, **common)

    def close(self) -> None:
        """Nothing to release (the file was read at construction)."""


def load_recorded(path: Path) -> list[RecordedAnswer]:
    """Read and check a recorded-answers file; errors name ``file:line`` and the field.

    Raises:
        RecordedAnswersError: missing file, invalid JSON, a bad or missing field, an answer
            with both or neither of ``sql``/``refusal``, or a duplicate (case_id, run_index).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordedAnswersError(f"{path}: recorded answers file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordedAnswersError(f"{path}: cannot read recorded answers: {exc}") from exc
    answers: list[RecordedAnswer] = []
    seen: dict[tuple[str, int], int] = {}

    def bad(b: BadJsonLine) -> None:
        if b.error is not None:
            raise RecordedAnswersError(f"{b.where}: not valid JSON: {b.error}") from None
        raise RecordedAnswersError(f"{b.where}: a line is a JSON object "
                                   '{"case_id", "run_index", "sql" | "refusal"}')

    for lineno, line, data in json_lines(path, text, bad):
        where = f"{path}:{lineno}"
        answer = _parse_line(data, where, lineno, line)
        key = (answer.case_id, answer.run_index)
        if key in seen:
            raise RecordedAnswersError(
                f"{where}: field 'run_index': case {answer.case_id} run {answer.run_index} is "
                f"already recorded at line {seen[key]}")
        seen[key] = lineno
        answers.append(answer)
    return answers


def _parse_line(data: dict[str, Any], where: str, lineno: int, line: str) -> RecordedAnswer:
    case_id = data.get("case_id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise RecordedAnswersError(f"{where}: field 'case_id': "
                                   + ("missing" if "case_id" not in data else
                                      f"must be a non-empty string, got {case_id!r}"))
    run_index = data.get("run_index")
    if isinstance(run_index, bool) or not isinstance(run_index, int) or run_index < 0:
        raise RecordedAnswersError(f"{where}: field 'run_index': "
                                   + ("missing" if "run_index" not in data else
                                      f"must be an integer >= 0, got {run_index!r}"))
    sql = data.get("sql")
    refusal = data.get("refusal")
    if sql is not None and refusal is not None:
        raise RecordedAnswersError(f"{where}: fields 'sql' and 'refusal': give one, not both")
    if sql is None and refusal is None:
        raise RecordedAnswersError(f"{where}: field 'sql': missing (give 'sql' or 'refusal'; "
                                   f"the line has {', '.join(sorted(data)) or 'no fields'})")
    if sql is not None and (not isinstance(sql, str) or not sql.strip()):
        raise RecordedAnswersError(f"{where}: field 'sql': must be a non-empty string, got {sql!r}")
    if refusal is not None and not isinstance(refusal, str):
        raise RecordedAnswersError(f"{where}: field 'refusal': must be a string (the reason), "
                                   f"got {refusal!r}")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise RecordedAnswersError(f"{where}: field 'model': must be a string, got {model!r}")
    usage_fields: dict[str, Any] = {}
    for field in ("input_tokens", "output_tokens"):
        value = data.get(field)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RecordedAnswersError(f"{where}: field '{field}': must be an integer >= 0, "
                                           f"got {value!r}")
            usage_fields[field] = value
    latency = data.get("latency_ms")
    if latency is not None:
        if isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0:
            raise RecordedAnswersError(f"{where}: field 'latency_ms': must be a number >= 0, "
                                       f"got {latency!r}")
        usage_fields["latency_ms"] = float(latency)
    return RecordedAnswer(
        case_id=case_id, run_index=run_index,
        sql=sql.strip() if sql is not None else None,
        refusal=(refusal.strip() or "no reason given") if refusal is not None else None,
        line=lineno, text=line, model=model, usage=Usage(**usage_fields) if usage_fields else None,
    )


def _join(numbers: Iterable[int]) -> str:
    return ", ".join(str(n) for n in numbers)
