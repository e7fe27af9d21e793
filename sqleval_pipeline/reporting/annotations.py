"""GitHub workflow commands for an evaluated batch (``sqleval run --github-annotations``,
docs/ci.md): one ``::error`` for a failing (or inconclusive) regression gate, then one per
newly failing case, at the case's line in its golden file::

    ::error file=evals/golden/commerce.jsonl,line=12,title=sqleval%3A com-012 newly failing::…

GitHub reads a workflow command from one line: the message (data) has ``%``, carriage return
and line feed escaped (``%25``, ``%0D``, ``%0A``); a property value also ``:`` and ``,``
(``%3A``, ``%2C``). Controls and lone surrogates are written as their ``\\uXXXX`` escape first.

>>> escape_data("50% done\\nnext")
'50%25 done%0Anext'
>>> escape_property("sqleval: a,b")
'sqleval%3A a%2Cb'
>>> command("error", "boom", file="evals/golden/x.jsonl", line=3, title="t: 1")
'::error file=evals/golden/x.jsonl,line=3,title=t%3A 1::boom'
"""

from __future__ import annotations

from sqleval_pipeline.reporting.ci_batch import BatchResults, case_summary, one_line
from sqleval_pipeline.textfiles import visible

#: the verdicts that fail ``sqleval run`` (cli.verdict)
FAILING = {"failed": "FAILED", "inconclusive": "INCONCLUSIVE"}


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return visible(str(text)).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, and ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: object) -> str:
    """``::level key=value,…::message`` with every part escaped; None properties are left out."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v is not None)
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def gate_annotation(results: BatchResults, config_file: str | None = None) -> str | None:
    """The ``::error`` of a failing or inconclusive gate (None otherwise), on the configuration
    file when given (a path relative to the repository root)."""
    label = FAILING.get(results.status)
    if label is None:
        return None
    failed = [v for v in results.comparisons if v.comparison.status in ("failed", "inconclusive")]
    lines = [f"regression gate {label} for {results.partition_key}, batch {results.batch.batch_id}: "
             f"{results.gate_summary}"]
    for v in failed:
        c = v.comparison
        lines.append(f"{v.label} {c.baseline_partition}: {one_line(c.reason)}")
    if results.newly_failing:
        shown = results.newly_failing[:20]
        more = len(results.newly_failing) - len(shown)
        lines.append(f"newly failing ({len(results.newly_failing)}): {', '.join(shown)}"
                     + (f" and {more} more" if more else ""))
    return command("error", "\n".join(lines), file=config_file,
                   title=f"sqleval: regression gate {label} ({results.partition_key})")


def case_annotations(results: BatchResults) -> list[str]:
    """One ``::error`` per newly failing case, in the order the verdict lists them: at its
    golden file and line (without a file when the case is no longer in the golden set)."""
    out = []
    for case_id in results.newly_failing:
        case = results.case(case_id)
        against = "; ".join(f"{v.label} {v.comparison.baseline_partition} passed it"
                            for v in results.newly_failing_in(case_id))
        detail = case_summary(case) if case is not None else "not in this batch's scorecard"
        message = f"{case_id} newly failing in {results.partition_key} ({against}):\n{detail}"
        out.append(command("error", message,
                           file=case.file if case is not None else None,
                           line=case.line if case is not None and case.file else None,
                           title=f"sqleval: {case_id} newly failing ({results.partition_key})"))
    return out


def github_annotations(results: BatchResults, config_file: str | None = None) -> list[str]:
    """Every workflow command for the batch: the gate's first (GitHub shows only the first
    ten errors of a step), then the newly failing cases."""
    gate = gate_annotation(results, config_file)
    return ([gate] if gate else []) + case_annotations(results)
