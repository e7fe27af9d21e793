"""Judge calibration across configurations: each judge's agreement with the human labels.

Labels name attempts by configuration *name*; the report (``calibration.json`` in the store)
says per judge how far its failure categories can be trusted.
"""

from __future__ import annotations

from pathlib import Path

from sqleval_pipeline.configs import load_configs
from sqleval_pipeline.judging.calibration import LabelError, calibrate, load_labels
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.batch_files import load_artifact
from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline.pipeline.records import Diagnosis


def calibration_report(env: Environment, labels_dir: Path | None = None):
    """Agreement of each judge with the human labels in ``evals/labels/``.

    Labels name attempts by configuration *name*; each is matched against the newest complete
    batch of that configuration's current version that ran its attempt (its case, its run
    index) and has diagnoses: a later run of a few cases does not hide the labelled attempts of
    an earlier full one, and the batches older than what covers every label are not read.
    Returns None without labels.
    """
    labels_dir = labels_dir or env.labels_dir
    if not labels_dir.exists() or not any(labels_dir.glob("*.jsonl")):
        return None
    labels = load_labels(labels_dir)
    by_judge: dict[str, list] = {}
    names: dict[str, str] = {}
    configs = {c.name: c for c in load_configs(env.configs_dir, project=env.project, errors=[])}
    for name in sorted({lab.config_name for lab in labels}):
        loaded = configs.get(name)
        if loaded is None:
            continue
        wanted = {(lab.case_id, lab.run_index) for lab in labels if lab.config_name == name}
        for b in reversed(env.store.batches(loaded.partition_key)):
            if not wanted:
                break
            ids = set(b.case_ids)
            ran = {(c, r) for c, r in wanted if r < b.runs and c in ids}
            if b.status != "complete" or not ran:
                continue
            diags = load_artifact(env.store.artifact(loaded.partition_key, b.batch_id,
                                                     bf.DIAGNOSES), Diagnosis)
            if diags is None:
                continue
            names[loaded.version] = name
            for d in diags:
                if (d.case_id, d.run_index) in ran:
                    by_judge.setdefault(d.judge, []).append(d)
            wanted -= ran
    settings = env.project.spec.judging
    return calibrate(by_judge, labels, config_name_of=names, min_n=settings.min_labels,
                     min_kappa=settings.min_kappa)


def judge_calibration_status(env: Environment, judge: str) -> str:
    """One line on how far ``judge``'s categories can be trusted, from the human labels."""
    try:
        report = calibration_report(env)
    except (LabelError, ValueError) as exc:
        return f"not known: the labels cannot be read ({str(exc).splitlines()[0]})"
    if report is None:
        return "uncalibrated: no human labels"
    for j in report.judges:
        if j.judge == judge:
            kappa = "n/a" if j.kappa is None else f"{j.kappa:.2f}"
            rate = "n/a" if j.agreement_rate is None else f"{100 * j.agreement_rate:.0f}%"
            return f"{j.status}: agreement {rate}, kappa {kappa}, n={j.n}"
    return "uncalibrated: no labelled attempt of this judge"


def calibration_path(env: Environment) -> Path:
    """Where the judge_calibration asset keeps its report."""
    return env.store.root / "calibration.json"


def calibration_lines(report) -> list[str]:
    """One line per judge: agreement with humans, kappa, n and calibration status."""
    out = []
    for j in report.judges:
        rate = f"{j.agreement_rate * 100:.0f}%" if j.agreement_rate is not None else "n/a"
        kappa = f"{j.kappa:.2f}" if j.kappa is not None else "n/a"
        out.append(f"judge {j.judge}: agreement with humans {rate}, Cohen's kappa {kappa}, "
                   f"n={j.n} — {j.status}")
    return out
