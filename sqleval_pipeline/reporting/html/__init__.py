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

from sqleval_pipeline.environment import Environment


def write_report(env: Environment, partition_keys: Sequence[str] | None, out_path: Path) -> Path:
    """Write the report of ``partition_keys`` (configuration versions ``<name>@<hash8>``, each
    at its newest scored batch; None or empty: every version with a scorecard) to ``out_path``
    (written atomically; parent folders created). Returns ``out_path``.

    Raises :class:`~sqleval_pipeline.environment.EvaluationError` (a
    :class:`~sqleval_pipeline.casefile.ShowError` for an unknown version) when there is
    nothing to report."""
    from sqleval_pipeline.reporting.html.collect import collect
    from sqleval_pipeline.reporting.html.page import render_report
    from sqleval_pipeline.store import atomic_write_text

    out_path = Path(out_path)
    atomic_write_text(out_path, render_report(collect(env, partition_keys or None)))
    return out_path


__all__ = ["write_report"]
