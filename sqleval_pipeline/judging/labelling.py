"""Human labels for the judges: draw a stratified sample of failed attempts, then label it.

``sample`` picks failed attempts (WRONG or DEFERRED_WRONGLY) from the newest complete batch
of each configuration's current version, spread over (rules-judge category × configuration)
strata in turn, so a rare category is not drowned by a common one. An attempt is never drawn
twice: not when it is already labelled or queued, and not when it repeats another run of the
same case with the same answer (three identical runs are one thing to label). The sample is
appended to ``<labels>/queue/sample.jsonl``.

The label session (:func:`label_session`) walks the queue for one labeller, showing the
question, the reference and the candidate SQL and the result difference — but *not* the
judges' categories (the label must not be anchored on what it checks). Each label is appended
to ``<labels>/<labeller>.jsonl`` and flushed to disk before the next attempt is shown, so an
interrupted session loses nothing and resumes at the first attempt this labeller has not
labelled or skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline.pipeline.records import Attempt, Diagnosis, FAILURE_CATEGORIES, Grade, load_records
from sqleval_pipeline.textfiles import ENCODING_ERRORS
from sqleval_pipeline.configs import load_configs
from sqleval_pipeline.pipeline.casefile import case_detail

QUEUE = Path("queue") / "sample.jsonl"
FAILED = ("WRONG", "DEFERRED_WRONGLY")
#: what the person types for each category (a number or the name)
CHOICES = {str(i + 1): c for i, c in enumerate(FAILURE_CATEGORIES)}


class QueueItem(BaseModel):
    """One failed attempt to label (identified as labels identify attempts: by name)."""

    config_name: str
    partition_key: str
    batch_id: str
    case_id: str
    run_index: int
    stratum: str
    sampled_at: str

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.config_name, self.case_id, self.run_index)


def queue_path(labels_dir: Path) -> Path:
    return labels_dir / QUEUE


def load_queue(labels_dir: Path) -> list[QueueItem]:
    p = queue_path(labels_dir)
    if not p.exists():
        return []
    return [QueueItem.model_validate_json(line) for line in p.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _labelled(labels_dir: Path) -> dict[tuple[str, str, int], set[str]]:
    """attempt key → labellers, from every label file (skips lines it cannot read)."""
    out: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for f in sorted(labels_dir.glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
                out[(d["config_name"], d["case_id"], int(d["run_index"]))].add(d["labeler"])
            except (ValueError, KeyError, TypeError):
                continue
    return out


def _normal(sql: str | None) -> str:
    return re.sub(r"\s+", " ", (sql or "").strip().lower())


def candidates(env: Environment) -> list[tuple[QueueItem, str]]:
    """(item, answer text) for every failed attempt of each configuration's newest batch."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out = []
    for loaded in load_configs(env.configs_dir, project=env.project, errors=[]):
        batch = env.store.latest(loaded.partition_key, complete_only=True)
        if batch is None:
            continue
        folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
        if not (folder / bf.GRADES).exists():
            continue
        grades = load_records(folder / bf.GRADES, Grade)
        answers = {a.key: a for a in load_records(folder / bf.ATTEMPTS, Attempt)}
        rules = {}
        if (folder / bf.DIAGNOSES).exists():
            rules = {d.key: d.category for d in load_records(folder / bf.DIAGNOSES, Diagnosis)
                     if d.judge == "rules"}
        for g in grades:
            if str(g.outcome) not in FAILED:
                continue
            a = answers.get(g.key)
            text = (a.sql if a and a.kind == "sql" else f"refusal: {a.refusal_reason}" if a else "")
            out.append((QueueItem(config_name=loaded.name, partition_key=batch.partition_key,
                                  batch_id=batch.batch_id, case_id=g.case_id,
                                  run_index=g.run_index,
                                  stratum=f"{rules.get(g.key, 'undiagnosed')} × {loaded.name}",
                                  sampled_at=now), text))
    return out


def sample(env: Environment, n: int, *, seed: int = 0) -> list[QueueItem]:
    """Draw up to ``n`` new attempts, round-robin over the strata; append them to the queue."""
    labels_dir = env.labels_dir
    taken = set(_labelled(labels_dir)) | {q.key for q in load_queue(labels_dir)}
    seen_answers = set()
    strata: dict[str, list[QueueItem]] = defaultdict(list)
    for item, answer in sorted(candidates(env), key=lambda x: (x[0].key, x[0].partition_key)):
        same = (item.config_name, item.case_id, _normal(answer))
        if item.key in taken or same in seen_answers:
            continue
        seen_answers.add(same)
        strata[item.stratum].append(item)
    rng = random.Random(seed)
    for items in strata.values():
        rng.shuffle(items)
    picked: list[QueueItem] = []
    order = sorted(strata)
    while len(picked) < n and any(strata[s] for s in order):
        for s in order:
            if strata[s] and len(picked) < n:
                picked.append(strata[s].pop())
    if picked:
        p = queue_path(labels_dir)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("a", encoding="utf-8", errors=ENCODING_ERRORS) as f:
            for item in picked:
                f.write(item.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
    return picked


def _labeller_file(labels_dir: Path, labeler: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", labeler)
    return labels_dir / f"{safe}.jsonl"


def _skips(labels_dir: Path, labeler: str) -> Path:
    return labels_dir / "queue" / f".skipped-{re.sub(r'[^A-Za-z0-9_.-]', '_', labeler)}"


def pending(labels_dir: Path, labeler: str) -> list[QueueItem]:
    """Queue items this labeller has neither labelled nor skipped, in queue order."""
    done = {k for k, who in _labelled(labels_dir).items() if labeler in who}
    skipped = set()
    if _skips(labels_dir, labeler).exists():
        skipped = set(_skips(labels_dir, labeler).read_text().split())
    return [q for q in load_queue(labels_dir)
            if q.key not in done and f"{q.config_name}/{q.case_id}/{q.run_index}" not in skipped]


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8", errors=ENCODING_ERRORS) as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def label_session(env: Environment, labeler: str, ask: Callable[[str], str],
                  show: Callable[[object], None]) -> dict[str, int]:
    """Label the pending attempts one by one. ``ask(prompt)`` returns what the person typed
    (EOF or Ctrl-C end the session); ``show(detail)`` displays a :class:`CaseDetail` run.
    Returns counts of what was done."""
    labels_dir = env.labels_dir
    done = {"labelled": 0, "skipped": 0}
    for item in pending(labels_dir, labeler):
        detail = case_detail(env, item.case_id, item.partition_key, item.batch_id)
        show((detail, item))
        while True:
            menu = " ".join(f"{k}={v}" for k, v in CHOICES.items())
            answer = ask(f"category ({menu}; s=skip, q=quit)").strip()
            if answer in ("q", "quit"):
                return done
            if answer in ("s", "skip"):
                _append(_skips(labels_dir, labeler), f"{item.config_name}/{item.case_id}/{item.run_index}")
                done["skipped"] += 1
                break
            category = CHOICES.get(answer, answer if answer in FAILURE_CATEGORIES else None)
            if category is None:
                show(f"not a category: {answer!r}")
                continue
            note = ask("note (optional)").strip() or None
            label = {"case_id": item.case_id, "run_index": item.run_index,
                     "config_name": item.config_name, "category": category, "labeler": labeler,
                     "note": note, "date": dt.date.today().isoformat(),
                     "partition_key": item.partition_key, "batch_id": item.batch_id}
            _append(_labeller_file(labels_dir, labeler), json.dumps(label, ensure_ascii=False))
            done["labelled"] += 1
            break
    return done
