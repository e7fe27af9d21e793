"""One golden case as evaluated in one batch: the core of ``sqleval show`` (docs/cases.md).

:func:`case_detail` gathers, for one case of the golden set and one stored batch of one
configuration version, the case itself (question, metadata, reference SQL, the frozen expected
result) and every run of it: the system's answer, the guarded execution, the grade and the
judges' diagnoses, read from the batch's stored artifacts (see :mod:`sqleval_pipeline.pipeline.store`).
Results are bounded to ``max_rows`` rows and keep their total row count. Nothing is recomputed
and nothing is written. :func:`batch_details` gives every case of one batch at once, reading
each artifact once (the HTML report's drill-down). :func:`resolve_config` and
:func:`check_partition` turn what a person typed into a configuration version
(``<name>@<hash8>``).

The result is a plain pydantic model (:class:`CaseDetail`): the CLI renders it with rich
(:mod:`sqleval_pipeline.reporting.case`) or prints it as JSON. Values in rows keep the
lossless JSON encoding of :mod:`sqleval_pipeline.results` (a DECIMAL is a string, a DATE an
ISO string). Every error is a :class:`ShowError` whose message says what to do.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.configs import ConfigError, LoadedConfig, load_config, load_configs
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError
from sqleval_pipeline.golden.model import Case, EncodedResult, golden_hash
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.pipeline.records import OUTCOMES, SUCCESS_OUTCOMES, Attempt, Diagnosis, Execution, Grade, Outcome
from sqleval_pipeline.results import ResultSet, encode_value
from sqleval_pipeline.pipeline.store import BatchInfo

#: identifies the JSON document ``sqleval show --json`` prints (bumped on an incompatible change)
FORMAT = "sqleval.case/1"
DEFAULT_MAX_ROWS = 10
_M = TypeVar("_M", bound=BaseModel)
_PARTITION_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}@[0-9a-f]{8}$")


class ShowError(EvaluationError):
    """The case, configuration or batch asked for cannot be shown; the message says what to do."""


# --------------------------------------------------------------------------- the model


class Rows(BaseModel):
    """A result bounded to its first rows: values in the lossless JSON encoding."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]] = Field(description="the first rows (at most max_rows)")
    total_rows: int = Field(description="how many rows the result has in all")

    @property
    def omitted(self) -> int:
        return self.total_rows - len(self.rows)


class CaseInfo(BaseModel):
    """The golden case as the golden set holds it now."""

    id: str
    question: str
    band: str
    difficulty: str
    split: str
    status: str
    cluster: str
    traps: list[str]
    order_matters: bool
    order_keys: list[str]
    reference_sql: str | None
    alternative_sqls: list[str]
    snapshot_id: str | None = Field(description="the snapshot its expected result was frozen on")
    notes: str | None
    expected: Rows | None = Field(description="the frozen expected result, if there is one")
    alternatives: list[Rows] = Field(description="one accepted result per alternative SQL")


class AnswerDetail(BaseModel):
    """What the system under test answered in one run."""

    kind: Literal["sql", "refusal", "error"]
    sql: str | None
    refusal_reason: str | None
    error_code: str | None
    error_message: str | None
    model: str | None
    generator: str | None
    retries: int
    created_at: str | None


class ExecutionDetail(BaseModel):
    """The guarded execution of a SQL answer."""

    status: Literal["ok", "refused", "timeout", "error"]
    result: Rows | None
    capped: bool = Field(description="the result cap cut the result (the rows stored are not all)")
    elapsed_ms: float | None
    layer: str | None = Field(description="the guard layer that refused (status refused)")
    reason: str | None = Field(description="the guard's reason code (status refused)")
    message: str | None
    error_source: Literal["sql", "harness"] | None
    error_code: str | None
    error_message: str | None
    executed_sql: str | None = Field(description="the DuckDB text run for another dialect")
    policy_version: str | None


class GradeDetail(BaseModel):
    """The outcome of one run under the grading rules, as the grader stored it."""

    outcome: Outcome | None = Field(description="None: a case without a frozen expected result")
    success: bool | None = Field(description="the outcome counts as a success for the case's band")
    exact: bool | None
    facts: bool | None
    reason: str
    mismatch: str | None
    alternative: int | None = Field(description="the accepted result that matched (0: primary)")
    executed: bool | None
    grader_version: str
    #: the test suite's check (docs/test-suite.md): passed, accidental_match, no_suite, inconclusive
    suite_check: str | None = None
    #: the outcome on the pinned snapshot alone, when the suite changed it
    snapshot_outcome: Outcome | None = None
    #: the neighbour of an accidental match and the rows on each side there (or why none judged)
    suite_detail: dict[str, Any] | None = None


class DiagnosisDetail(BaseModel):
    """One judge's verdict on why a failed run failed."""

    judge: str
    judge_version: str | None
    category: str
    explanation: str


class RunDetail(BaseModel):
    """One run of the case: answer, execution, grade and diagnoses."""

    run_index: int
    answer: AnswerDetail
    execution: ExecutionDetail | None = Field(description="None: the answer was not SQL")
    grade: GradeDetail | None = Field(description="None: the batch is not graded yet")
    diagnoses: list[DiagnosisDetail]


class BatchSummary(BaseModel):
    """The batch the runs come from."""

    batch_id: str
    status: str
    created_at: str
    finished_at: str | None
    snapshot_id: str
    policy_version: str | None
    golden_hash: str
    runs: int
    cases: int
    attempts_from: str | None


class CaseDetail(BaseModel):
    """One golden case as evaluated in one batch of one configuration version."""

    format: str = FORMAT
    partition_key: str
    config_name: str
    config_version: str
    max_rows: int
    case: CaseInfo
    batch: BatchSummary
    outcomes: dict[str, int] = Field(description="graded runs per outcome, all six outcomes")
    runs: list[RunDetail]
    notes: list[str]


# --------------------------------------------------------------------------- resolving


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _configs(env: Environment) -> tuple[list[LoadedConfig], list[str]]:
    errors: list[str] = []
    try:
        return load_configs(env.configs_dir, project=env.project, errors=errors), errors
    except ConfigError as exc:  # two files with one name
        raise ShowError(str(exc)) from exc


def resolve_config(env: Environment, config: str) -> LoadedConfig:
    """The configuration ``-c CONFIG`` names: a file path, else a configuration name (or the
    stem of a file in the configs folder) in the project's configs folder."""
    path = Path(config).expanduser()
    if path.is_file():
        try:
            return load_config(path, project=env.project)
        except ConfigError as exc:
            raise ShowError(str(exc)) from exc
    if "@" in config and "/" not in config:
        raise ShowError(f"-c takes a configuration file or name; {config!r} is a configuration "
                        f"version: pass --partition {config}")
    configs, errors = _configs(env)
    by_name = {c.name: c for c in configs} | {c.path.stem: c for c in configs}
    if config in by_name:
        return by_name[config]
    names = sorted({c.name for c in configs})
    kind = "configuration file" if path.suffix in (".yaml", ".yml") or "/" in config else \
        "configuration named"
    hint = ("; these configuration files could not be loaded:\n  " + "\n  ".join(errors)) \
        if errors else ""
    raise ShowError(f"no {kind} {config!r} (configurations in {env.configs_dir}: "
                    f"{', '.join(names) or 'none'}){_suggest(config, names)}{hint}")


def check_partition(env: Environment, partition_key: str) -> str:
    """``partition_key`` if the store holds batches of that configuration version."""
    runs_dir = env.store.root / "runs"
    known = env.store.partitions()
    if partition_key in known and env.store.batches(partition_key):
        return partition_key
    shape = "" if _PARTITION_RE.match(partition_key) else \
        " (a configuration version is written <name>@<8 hex digits>)"
    listed = ", ".join(known[:10]) + (" …" if len(known) > 10 else "")
    raise ShowError(f"no configuration version {partition_key!r} in the store {runs_dir}{shape}; "
                    f"versions with batches: {listed or 'none'}{_suggest(partition_key, known)}")


def _current(env: Environment, partition_key: str) -> LoadedConfig | None:
    """The project's configuration of that name (whatever its version now), if any."""
    name = partition_key.partition("@")[0]
    try:
        configs, _ = _configs(env)
    except ShowError:
        return None
    return next((c for c in configs if c.name == name), None)


def _run_hint(env: Environment, partition_key: str, cases: str | None = None,
              current: LoadedConfig | None = None) -> str:
    """How to evaluate this configuration version: ``sqleval run -c FILE [--cases ID]``."""
    extra = f" --cases {cases}" if cases else ""
    c = current or _current(env, partition_key)
    if c is None:
        return f"`sqleval run -c CONFIG{extra}`"
    try:
        shown = c.path.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = c.path
    changed = "" if c.partition_key == partition_key else \
        f" (its file has changed since: it is now {c.partition_key})"
    return f"`sqleval run -c {shown}{extra}`{changed}"


def _pick_batch(env: Environment, partition_key: str, batch_id: str | None) -> BatchInfo:
    batches = env.store.batches(partition_key)
    if batch_id is not None:  # looked up among the stored batches: never a path of its own
        found = next((b for b in batches if b.batch_id == batch_id), None)
        if found is None:
            check_partition(env, partition_key)
            ids = [b.batch_id for b in batches]
            listed = ("… " if len(ids) > 10 else "") + ", ".join(ids[-10:])
            raise ShowError(f"no batch {batch_id!r} for {partition_key}; its batches (newest "
                            f"last): {listed}{_suggest(batch_id, ids)}")
        return found
    if not batches:
        current = _current(env, partition_key)
        if current is None or current.partition_key != partition_key:
            check_partition(env, partition_key)  # neither evaluated nor the current version
        raise ShowError(f"no batch yet for {partition_key}; run "
                        f"{_run_hint(env, partition_key, current=current)} first")
    complete = [b for b in batches if b.status == "complete"]
    if not complete:
        raise ShowError(f"no complete batch yet for {partition_key} (unfinished, newest last: "
                        f"{', '.join(b.batch_id for b in batches[-5:])}); resume it with "
                        f"{_run_hint(env, partition_key)}, or pick one with --batch")
    return complete[-1]


def _find_case(env: Environment, case_id: str) -> Case:
    for c in env.cases:
        if c.id == case_id:
            return c
    ids = [c.id for c in env.cases]
    raise ShowError(f"unknown case id {case_id!r} ({len(ids)} cases in the golden set "
                    f"{env.project.golden_dir}){_suggest(case_id, ids)}")


# --------------------------------------------------------------------------- reading


def bound_rows(result: ResultSet | EncodedResult, max_rows: int) -> Rows:
    """The first ``max_rows`` rows of a result, JSON-encoded, with its total row count."""
    if isinstance(result, ResultSet):
        rows = [[encode_value(v) for v in row] for row in result.rows[:max_rows]]
    else:  # already in the JSON encoding (a frozen expected result)
        rows = [list(row) for row in result.rows[:max_rows]]
    return Rows(columns=list(result.columns), types=list(result.types), rows=rows,
                total_rows=len(result.rows))


def _copy(model: type[_M], record: BaseModel, **values: Any) -> _M:
    """``model`` filled from the same-named fields of a stored record, then ``values``."""
    fields = set(model.model_fields) - set(values)
    return model.model_validate({**record.model_dump(include=fields), **values})


def _case_info(case: Case, max_rows: int) -> CaseInfo:
    exp = case.expected
    return _copy(CaseInfo, case, expected=bound_rows(exp, max_rows) if exp else None,
                 alternatives=[bound_rows(a, max_rows) for a in exp.alternatives] if exp else [])


def _execution(e: Execution, max_rows: int) -> ExecutionDetail:
    return _copy(ExecutionDetail, e, capped=e.truncated,
                 result=bound_rows(e.result, max_rows) if e.result is not None else None)


def _grade(g: Grade) -> GradeDetail:
    return _copy(GradeDetail, g, success=None if g.outcome is None else g.outcome in SUCCESS_OUTCOMES)


def _of_case(records: list | None, case_id: str) -> dict[int, Any]:
    return {r.run_index: r for r in records or [] if r.case_id == case_id}


def _notes(env: Environment, batch: BatchInfo, grades: dict[int, Grade], graded: bool) -> list[str]:
    return _batch_notes(env, batch, graded) + _grader_notes(grades)


def _batch_notes(env: Environment, batch: BatchInfo, graded: bool) -> list[str]:

    notes = []
    if batch.status != "complete":
        notes.append(f"batch {batch.batch_id} is not complete (status {batch.status}): runs "
                     "may be missing")
    if batch.snapshot_id != env.snapshot_id:
        notes.append(f"this batch ran on snapshot {batch.snapshot_id}; the pinned snapshot is now "
                     f"{env.snapshot_id} (the expected result shown is frozen on the pinned one)")
    current = [c for c in env.cases if c.id in set(batch.case_ids)]
    if len(current) != len(batch.case_ids) or golden_hash(current) != batch.golden_hash:
        notes.append("the golden set has changed since this batch was made: the case shown is "
                     "the current one, the grades were made against the case as it was")
    if not graded:
        notes.append("this batch has no grades yet: finish it with `sqleval run`")
    return notes


def _grader_notes(grades: dict[int, Grade]) -> list[str]:

    # a grade on the test suite names the rules' version and the suite's ("<rules>+suite-<digest>")
    old = sorted({g.grader_version.split("+suite-")[0] for g in grades.values()} - {GRADER_VERSION})
    return [f"graded by grader {', '.join(old)}; the current grader is {GRADER_VERSION} "
            "(`sqleval run` grades the batch again)"] if old else []


def case_detail(env: Environment, case_id: str, partition_key: str, batch_id: str | None = None,
                max_rows: int = DEFAULT_MAX_ROWS) -> CaseDetail:
    """Case ``case_id`` as evaluated in batch ``batch_id`` (default: the newest complete batch)
    of configuration version ``partition_key``, read from the stored artifacts.

    Raises :class:`ShowError` for an unknown case, an unknown version, no (complete) batch,
    an unknown batch, or a case the batch did not evaluate."""

    if max_rows < 0:
        raise ShowError(f"--max-rows must be 0 or more, not {max_rows}")
    case = _find_case(env, case_id)
    batch = _pick_batch(env, partition_key, batch_id)
    if case_id not in batch.case_ids:
        others = [b.batch_id for b in env.store.batches(partition_key)
                  if case_id in b.case_ids and b.batch_id != batch.batch_id]
        where = (f"batches of {partition_key} that have it: {', '.join(others)} (--batch ID)"
                 if others else f"evaluate it with {_run_hint(env, partition_key, case_id)}")
        raise ShowError(f"case {case_id} is not in batch {batch.batch_id} of {partition_key} "
                        f"({len(batch.case_ids)} cases); {where}")

    def art(name: str) -> Path:
        return env.store.artifact(partition_key, batch.batch_id, name)

    attempts = _of_case(bf.load_artifact(art(bf.ATTEMPTS), Attempt), case_id)
    if not attempts:
        raise ShowError(f"batch {batch.batch_id} of {partition_key} has no stored attempts of "
                        f"{case_id} yet (status {batch.status}); resume it with "
                        f"{_run_hint(env, partition_key)} or pick another with --batch")
    executions = _of_case(bf.load_artifact(art(bf.EXECUTIONS), Execution), case_id)
    graded = art(bf.GRADES).exists()
    grades = _of_case(bf.load_artifact(art(bf.GRADES), Grade), case_id)
    diagnoses: dict[int, list[Diagnosis]] = {}
    for d in bf.load_artifact(art(bf.DIAGNOSES), Diagnosis) or []:
        if d.case_id == case_id:
            diagnoses.setdefault(d.run_index, []).append(d)
    return _detail(partition_key, case, batch, attempts, executions, grades, diagnoses, max_rows,
                   _notes(env, batch, grades, graded))


def batch_details(env: Environment, partition_key: str, batch_id: str | None = None,
                  max_rows: int = DEFAULT_MAX_ROWS) -> list[CaseDetail]:
    """Every case of batch ``batch_id`` (default: the newest complete batch) of configuration
    version ``partition_key``, as :func:`case_detail` gives one, reading each stored artifact
    once. Cases with no stored attempt, or no longer in the golden set, are left out (the
    caller compares with the batch's ``case_ids``); ordered like the batch's cases."""

    if max_rows < 0:
        raise ShowError(f"--max-rows must be 0 or more, not {max_rows}")
    batch = _pick_batch(env, partition_key, batch_id)

    def grouped(name: str, model: type[_M], many: bool = False) -> dict[str, dict[int, Any]]:
        out: dict[str, dict[int, Any]] = {}
        for r in bf.load_artifact(env.store.artifact(partition_key, batch.batch_id, name), model) or []:
            runs = out.setdefault(r.case_id, {})
            if many:
                runs.setdefault(r.run_index, []).append(r)
            else:
                runs[r.run_index] = r
        return out

    attempts, executions = grouped(bf.ATTEMPTS, Attempt), grouped(bf.EXECUTIONS, Execution)
    grades, diagnoses = grouped(bf.GRADES, Grade), grouped(bf.DIAGNOSES, Diagnosis, True)
    common = _batch_notes(env, batch, env.store.artifact(partition_key, batch.batch_id,
                                                          bf.GRADES).exists())
    cases = {c.id: c for c in env.cases}
    return [_detail(partition_key, cases[cid], batch, attempts[cid], executions.get(cid, {}),
                    grades.get(cid, {}), diagnoses.get(cid, {}), max_rows,
                    common + _grader_notes(grades.get(cid, {})))
            for cid in batch.case_ids if cid in cases and cid in attempts]


def _detail(partition_key: str, case: Case, batch: BatchInfo, attempts: dict[int, Attempt],
            executions: dict[int, Execution], grades: dict[int, Grade],
            diagnoses: dict[int, list[Diagnosis]], max_rows: int, notes: list[str]) -> CaseDetail:
    """One case's detail from its records in one batch, keyed by run index."""
    runs = [RunDetail(
        run_index=i, answer=_copy(AnswerDetail, a),
        execution=_execution(executions[i], max_rows) if i in executions else None,
        grade=_grade(grades[i]) if i in grades else None,
        diagnoses=[_copy(DiagnosisDetail, d) for d in sorted(diagnoses.get(i, []),
                                                              key=lambda d: d.judge)],
    ) for i, a in sorted(attempts.items())]
    counts = Counter(g.outcome for g in grades.values() if g.outcome is not None)
    name, _, version = partition_key.partition("@")
    return CaseDetail(
        partition_key=partition_key, config_name=name, config_version=version, max_rows=max_rows,
        case=_case_info(case, max_rows),
        batch=_copy(BatchSummary, batch, cases=len(batch.case_ids)),
        outcomes={o: counts[o] for o in OUTCOMES},
        runs=runs, notes=notes,
    )

