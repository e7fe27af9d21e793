"""The evaluation report as one self-contained HTML file (docs/report.md).

:func:`write_report` is the entry point the CLI (``sqleval report``), the Dagster scorecard
asset and ``make demo`` call: it reads the store (:mod:`.collect`), draws the plots
(:mod:`.plots`, matplotlib to inline SVG) and renders the page (:mod:`.page`, Jinja2
templates with the stylesheet and script inlined). The security evidence pack
(:mod:`.evidence`, ``sqleval guardrails report``) is a page of its own and a section of the
report. Nothing here imports typer or rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqleval_pipeline.golden.model import golden_hash
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline import derived
from sqleval_pipeline.pipeline.derived import code_digest, inputs_digest, stat_fingerprint
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.pipeline.environment import Environment


def write_report(env: Environment, partition_keys: Sequence[str] | None, out_path: Path) -> Path:
    """Write the report of ``partition_keys`` (configuration versions ``<name>@<hash8>``, each
    at its newest scored batch; None or empty: every version with a scorecard) to ``out_path``
    (written atomically; parent folders created). Returns ``out_path``.

    Raises :class:`~sqleval_pipeline.pipeline.environment.EvaluationError` (a
    :class:`~sqleval_pipeline.pipeline.casefile.ShowError` for an unknown version) when there is
    nothing to report."""
    # heavy (matplotlib, the page's templates: ~0.7 s), and only needed when a page is written
    from sqleval_pipeline.reporting.html.collect import collect
    from sqleval_pipeline.reporting.html.page import render_report

    out_path = Path(out_path)
    write_atomically(out_path, render_report(collect(env, partition_keys or None)))
    return out_path


def report_inputs(env: Environment, partition_key: str, batch_id: str) -> str:
    """The digest of everything a batch's page is made from (derived.py): the batch's files,
    every stored scorecard (the trend, by size and time), the golden set, the decisions, the
    judges' calibration, the guardrail evidence, the pinned snapshot and the reporting code."""
    from sqleval_pipeline.reporting.html.evidence import GUARDRAILS_REPORT, build_root  # 0.17 s: when asked

    folder = env.store.batch_dir(partition_key, batch_id)
    runs = env.store.root / "runs"
    stored = sorted(runs.glob("*/*/scorecard.json")) + sorted(runs.glob("*/*/batch.json"))
    return inputs_digest(
        "report", code_digest("sqleval_pipeline.reporting"), golden_hash(env.cases), env.snapshot_id,
        stat_fingerprint([env.serving, env.project.file]), env.decisions,
        env.store.root / "calibration.json", build_root(env) / GUARDRAILS_REPORT,
        Path(env.project.guard_policy_path), partition_key, batch_id,
        *(folder / n for n in (bf.BATCH, bf.SCORECARD, bf.COMPARISONS, bf.GRADES,
                               bf.DIAGNOSES, bf.ATTEMPTS, bf.EXECUTIONS,
                               bf.DIFF, bf.GATE, bf.CALIBRATED_REFUSAL)),
        stat_fingerprint(stored))


def report_is_current(env: Environment, partition_key: str, batch_id: str) -> bool:
    """The batch's page was made from the inputs it would be made from now."""

    folder = env.store.batch_dir(partition_key, batch_id)
    return derived.reusable(folder, bf.REPORT, report_inputs(env, partition_key, batch_id)) is not None


def batch_report(env: Environment, partition_key: str, batch_id: str) -> Path:
    """The batch's page (``report.html`` in its folder), written unless the page there was
    made from the same inputs (:func:`report_inputs`)."""

    folder = env.store.batch_dir(partition_key, batch_id)
    digest = report_inputs(env, partition_key, batch_id)
    done = derived.reusable(folder, bf.REPORT, digest)
    if done is not None:
        return done
    out = write_report(env, [partition_key], folder / bf.REPORT)
    derived.record(folder, bf.REPORT, digest)
    return out


__all__ = ["batch_report", "report_inputs", "report_is_current", "write_report"]
