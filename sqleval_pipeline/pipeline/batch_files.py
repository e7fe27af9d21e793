"""The files of a batch folder (``<build>/store/runs/<name>@<version>/<batch id>/``): the
contract between the stages, named once here. Each stage writes its own file and reads only
what an earlier stage wrote (docs/configurations.md, "Batches").

=====================  =======================  ===========================================
name                   written by               holds
=====================  =======================  ===========================================
``batch.json``         the store                the batch's description (not recorded)
``inputs.json``        attempts                 the configuration as evaluated
``attempts.parquet``   attempts                 every case × run: SQL, refusal or error
``executions.parquet`` executions               each SQL attempt through the guard
``grades.parquet``     grades                   each attempt's outcome
``diagnoses.parquet``  diagnoses                why each failed attempt failed
``scorecard.json``     scorecard                accuracy with intervals, per slice
``comparisons.json``   gate                     every comparison's status; the gate
``diff.json``          gate                     the paired diff against the baseline
``gate.json``          gate                     the baseline comparison's gate result
``calibrated_refusal.json`` gate                do stricter refusals earn their keep
``regressions.md``     the gate's metadata      each newly failing case's SQL side by side
``report.html``        after the gate           the page a person opens (not recorded)
``files.json``         every stage (publish)    size and SHA-256 of the recorded files
``derived.json``       scorecard, gate, page    what each derived file was derived from
=====================  =======================  ===========================================

A record file with no record (no SQL attempt at all is a legitimate batch) is written as its
empty JSON Lines *twin* (``executions.jsonl``): Parquet needs a schema. :func:`save_artifact`
and :func:`artifact_file` apply that rule, for every reader and writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqleval_pipeline.pipeline.recordio import load_records, save_records

BATCH = "batch.json"
INPUTS = "inputs.json"
ATTEMPTS = "attempts.parquet"
EXECUTIONS = "executions.parquet"
GRADES = "grades.parquet"
DIAGNOSES = "diagnoses.parquet"
SCORECARD = "scorecard.json"
COMPARISONS = "comparisons.json"
DIFF = "diff.json"
GATE = "gate.json"
CALIBRATED_REFUSAL = "calibrated_refusal.json"
REGRESSIONS = "regressions.md"
REPORT = "report.html"
FILES = "files.json"
DERIVED = "derived.json"


def save_artifact(path: Path, records: Sequence) -> None:
    """Parquet when there are records; an empty JSON Lines twin when there are none.

    >>> import tempfile; folder = Path(tempfile.mkdtemp())
    >>> save_artifact(folder / EXECUTIONS, []); artifact_file(folder / EXECUTIONS).name
    'executions.jsonl'
    """
    if records:
        save_records(path, records)
    else:
        save_records(path.with_suffix(".jsonl"), [])


def artifact_file(path: Path) -> Path | None:
    """The stored file of a record artifact: ``path``, else its JSON Lines twin, else None."""
    for p in (path, path.with_suffix(".jsonl")):
        if p.exists():
            return p
    return None


def load_artifact(path: Path, model):
    """The records of an artifact (either twin), or None when neither exists."""
    found = artifact_file(path)
    return None if found is None else load_records(found, model)
