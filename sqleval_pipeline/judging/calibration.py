"""Judge calibration (docs/configurations.md, judges): how far each judge agrees with human labels, and with each other.

Human labels
------------
People label a stratified sample of failed attempts in ``evals/labels/*.jsonl``, one JSON
object per line::

    {"case_id": "q07", "run_index": 1, "config_name": "claude", "category": "wrong_filter",
     "labeler": "asha", "note": "used order_date, not delivered_date"}

An attempt is identified by configuration **name** + case + run index — not by configuration
*version* as everywhere else — because a configuration's version changes whenever a defining
field changes, and a label written against last week's run must keep pointing at "the
``claude`` configuration's run 1 of q07". :func:`calibrate` therefore needs
``config_name_of`` to map each diagnosis's ``config_version`` to its configuration name. When a
judge diagnosed two versions of the same name/case/run, the label cannot say which one the
person read: that attempt is reported as *ambiguous* and left out of that judge's numbers.

Several people may label the same attempt. Where they agree the attempt counts once with that
category; where they disagree it is a *human conflict*, reported and left out (a judge cannot
be scored against a reference people do not agree on). One person labelling an attempt twice
is an error in the label files.

What is reported
----------------
For each judge: how many labelled attempts it diagnosed (``n``), the agreement rate, Cohen's
kappa (agreement corrected for chance, :func:`cohens_kappa`), the human × judge confusion
table, and a status — ``calibrated`` when ``n >= 20`` (at least 20 to start) *and* kappa is at
least the project's threshold (default 0.6), otherwise ``uncalibrated (n < 20)`` or
``uncalibrated (kappa 0.51 < 0.60)``: its categories are then shown but must not be trusted.
Kappa comes with a 95% interval (:func:`kappa_interval`). For each pair
of judges: the disagreement table over the attempts both diagnosed (category pairs, counts,
example attempt keys).

>>> from sqleval_pipeline.pipeline.records import Diagnosis
>>> d = lambda cat, judge="rules": Diagnosis(config_version="v1", case_id="q01", run_index=0,
...                                           category=cat, explanation="…", judge=judge)
>>> label = HumanLabel(case_id="q01", run_index=0, config_name="claude",
...                    category="wrong_filter", labeler="asha")
>>> report = calibrate({"rules": [d("wrong_filter")], "llm:claude-x": [d("wrong_grain", "llm:claude-x")]},
...                    [label], config_name_of={"v1": "claude"})
>>> [(j.judge, j.n, j.agreement_rate, j.status) for j in report.judges]
[('llm:claude-x', 1, 0.0, 'uncalibrated (n < 20)'), ('rules', 1, 1.0, 'uncalibrated (n < 20)')]
>>> row = report.disagreements[0].rows[0]
>>> (row.judge_a_category, row.judge_b_category, row.count)
('wrong_grain', 'wrong_filter', 1)
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqleval_pipeline.pipeline.records import FAILURE_CATEGORIES, AttemptKey, Diagnosis, FailureCategory
from sqleval_pipeline.textfiles import BadJsonLine, json_lines
from sqleval_pipeline.errors import InputError, SqlevalError

__all__ = [
    "MIN_CALIBRATION_N", "HumanLabel", "LabelError", "LabelRef",
    "HumanConflict", "JudgeCalibration", "DisagreementRow", "JudgePairDisagreement",
    "CalibrationReport", "load_labels", "cohens_kappa", "kappa_interval", "calibrate",
    "MIN_CALIBRATION_KAPPA", "calibration_status",
]

#: labelled attempts a judge needs before its categories are reported as calibrated
MIN_CALIBRATION_N = 20
#: Cohen's kappa a judge needs (with enough labels) to be reported as calibrated
MIN_CALIBRATION_KAPPA = 0.6
#: where human labels live
#: example attempt keys kept per disagreement cell
MAX_EXAMPLES = 3

LabelKeyTuple = tuple[str, str, int]
AttemptKeyTuple = tuple[str, str, int]


# --------------------------------------------------------------------------- labels


class HumanLabel(BaseModel):
    """One person's category for one failed attempt (a line of ``evals/labels/*.jsonl``).

    >>> HumanLabel(case_id="q07", run_index=1, config_name="claude", category="wrong_filter",
    ...            labeler="asha").key
    ('claude', 'q07', 1)
    """

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    run_index: int = Field(ge=0)
    config_name: str = Field(min_length=1, description="configuration *name* (versions change)")
    category: FailureCategory
    labeler: str = Field(min_length=1)
    note: str | None = None
    date: _dt.date | None = Field(None, description="when it was labelled")
    partition_key: str | None = Field(None, description="the configuration version labelled")
    batch_id: str | None = Field(None, description="the batch the labeller read")

    @property
    def key(self) -> LabelKeyTuple:
        """``(config_name, case_id, run_index)``: the attempt, independent of config version."""
        return (self.config_name, self.case_id, self.run_index)


class LabelError(SqlevalError, ValueError):
    """Label files are invalid; ``problems`` lists each as ``file:line:field: message``."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        head = f"{len(self.problems)} problem(s) in the human labels:\n  "
        super().__init__(head + "\n  ".join(self.problems))


def _collect_bad_line(problems: list[str]) -> Callable[[BadJsonLine], None]:
    def collect(b: BadJsonLine) -> None:
        problems.append(f"{b.where}: not valid JSON ({b.reason})" if b.error is not None
                        else f"{b.where}: {b.reason}")
    return collect


def load_labels(directory: str | Path) -> list[HumanLabel]:
    """Every label in ``directory/*.jsonl`` (files in name order, blank lines skipped).

    All problems are collected and raised together as one :class:`LabelError` whose lines
    read ``file:line:field: message`` — bad JSON, a missing or unknown field, a category
    outside the six, or one labeler labelling the same attempt twice.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text('{"case_id": "q1", "run_index": 0, "config_name": "c",'
    ...                                ' "category": "wrong_metric", "labeler": "bo"}\\n')
    >>> [l.category for l in load_labels(d)]
    ['wrong_metric']
    >>> _ = (d / "b.jsonl").write_text('{"case_id": "q2", "run_index": 0, "config_name": "c",'
    ...                                ' "category": "typo", "labeler": "bo"}\\n')
    >>> try:
    ...     load_labels(d)
    ... except LabelError as exc:
    ...     print(*exc.problems)  # doctest: +ELLIPSIS
    /.../b.jsonl:1:category: Input should be 'wrong_table', ...
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise LabelError([f"{directory}: the labels directory does not exist"])
    labels: list[HumanLabel] = []
    problems: list[str] = []
    seen: dict[tuple[LabelKeyTuple, str], str] = {}
    for path in sorted(directory.glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            continue
        for lineno, _line, data in json_lines(path, text, _collect_bad_line(problems)):
            where = f"{path}:{lineno}"
            try:
                label = HumanLabel.model_validate(data)
            except ValidationError as exc:
                for err in exc.errors():
                    field = ".".join(str(p) for p in err["loc"]) or "(line)"
                    problems.append(f"{where}:{field}: {err['msg']}")
                continue
            first = seen.get((label.key, label.labeler))
            if first is not None:
                problems.append(
                    f"{where}:labeler: {label.labeler} already labelled attempt "
                    f"{_fmt_label_key(label.key)} at {first}; keep one label per person and attempt"
                )
                continue
            seen[(label.key, label.labeler)] = where
            labels.append(label)
    if problems:
        raise LabelError(problems)
    return labels


# --------------------------------------------------------------------------- statistics


def cohens_kappa(pairs: Iterable[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters over ``(rater_a, rater_b)`` category pairs.

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed agreement and ``p_e`` the
    agreement expected by chance from each rater's category frequencies. Computed in exact
    integer arithmetic: ``(n·agree − Σ a_k·b_k) / (n² − Σ a_k·b_k)``.

    Returns None when it is undefined: no pairs, or ``p_e = 1`` (both raters used one and
    the same category for everything — agreement is then certain by chance alone).

    >>> cohens_kappa([("a", "a"), ("b", "b"), ("c", "c")])          # perfect agreement
    1.0
    >>> cohens_kappa([("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")])  # chance level
    0.0
    >>> cohens_kappa([("a", "a")] * 5) is None, cohens_kappa([]) is None
    (True, True)
    """
    pairs = list(pairs)
    n = len(pairs)
    if n == 0:
        return None
    agree = sum(1 for a, b in pairs if a == b)
    count_a = Counter(a for a, _ in pairs)
    count_b = Counter(b for _, b in pairs)
    chance = sum(count_a[k] * count_b[k] for k in count_a.keys() & count_b.keys())
    denominator = n * n - chance
    if denominator == 0:
        return None
    return (n * agree - chance) / denominator


def calibration_status(n: int, kappa: float | None, min_n: int = MIN_CALIBRATION_N,
                       min_kappa: float = MIN_CALIBRATION_KAPPA) -> str:
    """The one rule for trusting a judge's categories: enough labels and enough kappa.

    >>> calibration_status(25, 0.71), calibration_status(19, 0.9), calibration_status(30, 0.5)
    ('calibrated', 'uncalibrated (n < 20)', 'uncalibrated (kappa 0.50 < 0.60)')
    """
    if n < min_n:
        return f"uncalibrated (n < {min_n})"
    if kappa is None or kappa < min_kappa:
        shown = "undefined" if kappa is None else f"{kappa:.2f}"
        return f"uncalibrated (kappa {shown} < {min_kappa:.2f})"
    return "calibrated"


def kappa_interval(pairs: Iterable[tuple[str, str]], z: float = 1.96) -> tuple[float, float] | None:
    """A 95% interval for Cohen's kappa: ``kappa ± z·SE`` with the large-sample standard error
    ``SE = sqrt(p_o (1 − p_o) / (n (1 − p_e)²))`` (Cohen 1960), clipped to [−1, 1].

    Hand-computed: 10 pairs, 8 agreements, each rater 5 × "a" and 5 × "b":
    p_o = 0.8, p_e = 0.5, kappa = 0.6, SE = sqrt(0.8·0.2 / (10·0.25)) = 0.253, so
    0.6 ± 0.496:

    >>> pairs = [("a", "a")] * 4 + [("b", "b")] * 4 + [("a", "b"), ("b", "a")]
    >>> [round(x, 3) for x in kappa_interval(pairs)]
    [0.104, 1.0]
    >>> kappa_interval([]) is None, kappa_interval([("a", "a")] * 3) is None
    (True, True)
    """
    pairs = list(pairs)
    n = len(pairs)
    kappa = cohens_kappa(pairs)
    if kappa is None:
        return None
    p_o = sum(1 for a, b in pairs if a == b) / n
    count_a = Counter(a for a, _ in pairs)
    count_b = Counter(b for _, b in pairs)
    p_e = sum(count_a[k] * count_b[k] for k in count_a.keys() & count_b.keys()) / (n * n)
    se = (p_o * (1 - p_o) / (n * (1 - p_e) ** 2)) ** 0.5
    return (max(-1.0, kappa - z * se), min(1.0, kappa + z * se))


def _confusion(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    table = {h: {j: 0 for j in FAILURE_CATEGORIES} for h in FAILURE_CATEGORIES}
    for h, j in pairs:
        table[h][j] += 1
    return table


# --------------------------------------------------------------------------- report models


class LabelRef(BaseModel):
    """An attempt as labels name it: configuration name, case, run index."""

    config_name: str
    case_id: str
    run_index: int


class HumanConflict(BaseModel):
    """An attempt people labelled differently (left out of every judge's numbers)."""

    attempt: LabelRef
    labels: dict[str, str] = Field(description="labeler -> category")


class JudgeCalibration(BaseModel):
    """One judge against the human labels."""

    judge: str
    judge_versions: list[str] = Field(description="versions seen on its diagnoses (one expected)")
    n: int = Field(description="labelled attempts (human consensus) this judge diagnosed")
    agreements: int
    agreement_rate: float | None = Field(description="None when n = 0")
    kappa: float | None = Field(description="Cohen's kappa; None when n = 0 or undefined")
    kappa_ci: tuple[float, float] | None = Field(None, description="95% interval of kappa")
    kappa_note: str | None = None
    status: str = Field(description="'calibrated', 'uncalibrated (n < 20)' or "
                        "'uncalibrated (kappa 0.51 < 0.60)'")
    calibrated: bool
    confusion: dict[str, dict[str, int]] = Field(description="human category -> judge category -> count")
    labelled_not_diagnosed: int = Field(description="labelled attempts this judge has no diagnosis for")
    ambiguous: list[LabelRef] = Field(default_factory=list,
                                      description="labels matching diagnoses of several config versions")


class DisagreementRow(BaseModel):
    """A pair of different categories two judges gave the same attempts."""

    judge_a_category: str
    judge_b_category: str
    count: int
    examples: list[AttemptKey]


class JudgePairDisagreement(BaseModel):
    """Two judges on the attempts both diagnosed."""

    judge_a: str
    judge_b: str
    n_both: int
    n_agree: int
    agreement_rate: float | None
    kappa: float | None
    rows: list[DisagreementRow] = Field(description="disagreeing category pairs, most frequent first")


class CalibrationReport(BaseModel):
    """Every judge's agreement with people, and the judges' disagreements (JSON-serialisable)."""

    min_n: int
    min_kappa: float = MIN_CALIBRATION_KAPPA
    categories: list[str]
    n_labels: int = Field(description="label lines read")
    n_labelled_attempts: int = Field(description="distinct attempts with a human consensus")
    labelers: list[str]
    human_conflicts: list[HumanConflict]
    judges: list[JudgeCalibration]
    disagreements: list[JudgePairDisagreement]


# --------------------------------------------------------------------------- calibrate


def _name_lookup(config_name_of: Callable[[str], str] | Mapping[str, str]) -> Callable[[str], str]:
    if isinstance(config_name_of, Mapping):
        mapping = config_name_of

        def lookup(version: str) -> str:
            if version not in mapping:
                raise InputError(
                    f"config_name_of has no configuration name for config version {version!r}; "
                    f"known versions: {', '.join(sorted(mapping)) or 'none'}"
                )
            return mapping[version]

        return lookup
    return config_name_of


def _fmt_label_key(key: LabelKeyTuple) -> str:
    return f"{key[0]}/{key[1]}/run {key[2]}"


def calibrate(diagnoses: Mapping[str, Sequence[Diagnosis]], labels: Sequence[HumanLabel], *,
              config_name_of: Callable[[str], str] | Mapping[str, str],
              min_n: int = MIN_CALIBRATION_N,
              min_kappa: float = MIN_CALIBRATION_KAPPA) -> CalibrationReport:
    """Compare each judge's diagnoses with the human labels, and the judges with each other.

    Args:
        diagnoses: judge name -> its diagnoses (one per attempt; e.g. ``{"rules": [...],
            "llm:claude-opus-4-1": [...]}``).
        labels: from :func:`load_labels`.
        config_name_of: configuration version -> configuration name (a callable or a dict),
            to match diagnoses (keyed by version) with labels (keyed by name).
        min_n: labelled attempts needed for ``calibrated`` (default 20).
        min_kappa: Cohen's kappa needed for ``calibrated`` (default 0.6).

    Raises:
        ValueError: a judge has two diagnoses for one attempt, a diagnosis names another
            judge than its key, or a config version has no name.
    """
    if min_n < 1:
        raise InputError(f"min_n must be >= 1, got {min_n}")
    name_of = _name_lookup(config_name_of)

    # human consensus per attempt
    by_key: dict[LabelKeyTuple, dict[str, str]] = defaultdict(dict)
    conflicts: list[HumanConflict] = []
    for label in labels:
        previous = by_key[label.key].get(label.labeler)
        if previous is not None and previous != label.category:
            raise InputError(f"{label.labeler} labelled attempt {_fmt_label_key(label.key)} "
                             f"both {previous} and {label.category}")
        by_key[label.key][label.labeler] = label.category
    human: dict[LabelKeyTuple, str] = {}
    for key, by_person in sorted(by_key.items()):
        categories = set(by_person.values())
        if len(categories) == 1:
            human[key] = categories.pop()
        else:
            conflicts.append(HumanConflict(attempt=LabelRef(config_name=key[0], case_id=key[1],
                                                            run_index=key[2]),
                                           labels=dict(sorted(by_person.items()))))

    # each judge's diagnoses by attempt key, checked
    indexed: dict[str, dict[AttemptKeyTuple, Diagnosis]] = {}
    names: dict[str, str] = {}
    for judge, items in diagnoses.items():
        table: dict[AttemptKeyTuple, Diagnosis] = {}
        for d in items:
            if d.judge != judge:
                raise InputError(f"diagnoses[{judge!r}] holds a diagnosis from judge {d.judge!r} "
                                 f"(attempt {d.key})")
            if d.key in table:
                raise InputError(f"judge {judge!r} has two diagnoses for attempt {d.key}")
            table[d.key] = d
            if d.config_version not in names:
                names[d.config_version] = name_of(d.config_version)
        indexed[judge] = table

    judges = [_judge_calibration(judge, indexed[judge], human, names, min_n, min_kappa)
              for judge in sorted(indexed)]
    pairs = [_pair_disagreement(a, indexed[a], b, indexed[b])
             for a, b in combinations(sorted(indexed), 2)]
    return CalibrationReport(
        min_n=min_n, min_kappa=min_kappa, categories=list(FAILURE_CATEGORIES), n_labels=len(labels),
        n_labelled_attempts=len(human), labelers=sorted({lab.labeler for lab in labels}),
        human_conflicts=conflicts, judges=judges, disagreements=pairs,
    )


def _judge_calibration(judge: str, table: Mapping[AttemptKeyTuple, Diagnosis],
                       human: Mapping[LabelKeyTuple, str], names: Mapping[str, str],
                       min_n: int, min_kappa: float = MIN_CALIBRATION_KAPPA) -> JudgeCalibration:
    by_label_key: dict[LabelKeyTuple, list[Diagnosis]] = defaultdict(list)
    for d in table.values():
        by_label_key[(names[d.config_version], d.case_id, d.run_index)].append(d)
    pairs: list[tuple[str, str]] = []
    ambiguous: list[LabelRef] = []
    missing = 0
    for key, category in sorted(human.items()):
        found = by_label_key.get(key, [])
        if not found:
            missing += 1
        elif len(found) > 1:
            ambiguous.append(LabelRef(config_name=key[0], case_id=key[1], run_index=key[2]))
        else:
            pairs.append((category, found[0].category))
    n = len(pairs)
    agreements = sum(1 for h, j in pairs if h == j)
    kappa = cohens_kappa(pairs)
    note = None
    if n and kappa is None:
        note = "undefined: human and judge used one and the same category throughout"
    status = calibration_status(n, kappa, min_n, min_kappa)
    calibrated = status == "calibrated"
    return JudgeCalibration(
        judge=judge,
        judge_versions=sorted({d.judge_version or "unversioned" for d in table.values()}),
        n=n, agreements=agreements, agreement_rate=agreements / n if n else None,
        kappa=kappa, kappa_ci=kappa_interval(pairs), kappa_note=note,
        status=status, calibrated=calibrated, confusion=_confusion(pairs),
        labelled_not_diagnosed=missing, ambiguous=ambiguous,
    )


def _pair_disagreement(a: str, table_a: Mapping[AttemptKeyTuple, Diagnosis],
                       b: str, table_b: Mapping[AttemptKeyTuple, Diagnosis]) -> JudgePairDisagreement:
    both = sorted(table_a.keys() & table_b.keys())
    cells: dict[tuple[str, str], list[AttemptKeyTuple]] = defaultdict(list)
    agree = 0
    for key in both:
        ca, cb = table_a[key].category, table_b[key].category
        if ca == cb:
            agree += 1
        else:
            cells[(ca, cb)].append(key)
    rows = [
        DisagreementRow(
            judge_a_category=ca, judge_b_category=cb, count=len(keys),
            examples=[AttemptKey(config_version=k[0], case_id=k[1], run_index=k[2])
                      for k in keys[:MAX_EXAMPLES]],
        )
        for (ca, cb), keys in sorted(cells.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    pairs = [(table_a[k].category, table_b[k].category) for k in both]
    return JudgePairDisagreement(
        judge_a=a, judge_b=b, n_both=len(both), n_agree=agree,
        agreement_rate=agree / len(both) if both else None, kappa=cohens_kappa(pairs), rows=rows,
    )
