"""One status per configuration: its current version, its accuracy and the state of its gate.

Read from the store's persisted batches only, so it does not depend on which configuration
ran last. For each configuration name:

* the **gated batch** is the newest batch of the *current* version that has a gate result
  (``comparisons.json``); when the current version has none yet, the newest gated batch of
  any earlier version of the name;
* the **gate** is that batch's, as ``sqleval run`` says it (:func:`gate_status`): ``failed``
  (a comparison failed), ``inconclusive`` (the batch is an outage, or a comparison could not
  decide), ``passed``, or ``not evaluated`` (nothing to compare with — never shown as passed
  or failed);
* a failed gate of an earlier version **stays failed** until the current version has a gated
  batch of its own (the note says the current version is not evaluated yet); an earlier
  version that passed says nothing about the current one: ``not evaluated``.

The accuracy and its interval are the gated batch's scorecard's (the current version's when it
has a scorecard but no gate yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.comparisons import COMPARISONS_FILE, GateReport
from sqleval_pipeline.pipeline.store import BatchInfo, Store, batch_order
from sqleval_pipeline.scoring import load_scorecard

#: a batch's gate, in the words the verdict, the CI outputs and the status view share
PASSED, FAILED, NOT_GATED, INCONCLUSIVE = "passed", "failed", "not gated", "inconclusive"
GateState = Literal["failed", "inconclusive", "passed", "not evaluated"]
#: failing first, then what needs a look, then green
ORDER: dict[str, int] = {"failed": 0, "inconclusive": 1, "not evaluated": 2, "passed": 3}


def gate_status(card, report=None, gate=None) -> tuple[str, str]:
    """(status, one-line summary) from the stored comparisons (``GateReport``), else the
    declared baseline's ``GateResult`` (batches gated before comparisons were recorded).
    An outage (too many ERROR attempts) or an inconclusive comparison is INCONCLUSIVE."""
    if report is not None:
        if report.inconclusive or any(c.status == "inconclusive" for c in report.comparisons):
            status = INCONCLUSIVE
        elif any(c.status == "failed" for c in report.comparisons) or report.thresholds_failed:
            status = FAILED
        else:
            status = PASSED if report.evaluated or report.thresholds else NOT_GATED
        return status, report.summary()
    if gate is not None:
        return (INCONCLUSIVE if gate.inconclusive else PASSED if gate.passed else FAILED), gate.message
    if card is not None and card.inconclusive:
        return INCONCLUSIVE, "too many ERROR attempts to measure the system; nothing compared"
    return NOT_GATED, "no comparison was recorded for this batch"


def newly_failing(report=None, diff=None) -> list[str]:
    """Case ids newly failing in any comparison that was made (first seen first)."""
    ids: list[str] = []
    if report is not None:
        for c in report.evaluated:
            ids += c.newly_failing
    elif diff is not None:
        ids += diff.newly_failing
    return list(dict.fromkeys(ids))


@dataclass(frozen=True)
class ConfigurationStatus:
    name: str
    current_version: str
    gate: GateState
    gated_version: str | None = None
    gated_batch: str | None = None
    accuracy: float | None = None
    low: float | None = None
    high: float | None = None
    note: str = ""

    def row(self) -> dict:
        pct = (lambda v: None if v is None else round(100 * v, 1))
        return {"configuration": self.name, "current_version": self.current_version,
                "gate": self.gate, "accuracy (%)": pct(self.accuracy),
                "interval (%)": (f"{pct(self.low)}–{pct(self.high)}"
                                 if self.low is not None and self.high is not None else ""),
                "gated_version": self.gated_version or "", "gated_batch": self.gated_batch or "",
                "note": self.note}


def gate_state(report: GateReport) -> GateState:
    """The state one gate result shows: :func:`gate_status`'s, with "not gated" (nothing to
    compare with) said as "not evaluated".

    >>> from sqleval_pipeline.pipeline.comparisons import Comparison
    >>> c = lambda s: Comparison(kind="baseline", status=s, reason="")
    >>> [gate_state(GateReport(partition_key="a@1", batch_id="b", comparisons=cs))
    ...  for cs in ([c("failed"), c("passed")], [c("skipped")], [c("inconclusive")], [c("passed")])]
    ['failed', 'not evaluated', 'inconclusive', 'passed']
    """
    status, _ = gate_status(None, report)
    return "not evaluated" if status == NOT_GATED else status  # type: ignore[return-value]


def _gated(store: Store, key: str) -> tuple[BatchInfo, GateReport] | None:
    """The newest batch of ``key`` with a readable gate result."""
    for batch in reversed(store.batches(key)):
        f = store.batch_dir(key, batch.batch_id) / COMPARISONS_FILE
        if f.is_file():
            try:
                return batch, GateReport.model_validate_json(f.read_text(encoding="utf-8"))
            except ValueError:  # a damaged file is no result: look at the batch before
                continue
    return None


def _accuracy(store: Store, key: str, batch_id: str) -> tuple[float | None, float | None, float | None]:
    f = store.artifact(key, batch_id, bf.SCORECARD)
    if not f.is_file():
        return None, None, None
    try:
        acc = load_scorecard(f).overall.accuracy
    except (ValueError, OSError):
        return None, None, None
    if acc is None:
        return None, None, None
    ci = acc.ci
    return acc.value, (ci.low if ci else None), (ci.high if ci else None)


def configuration_statuses(store: Store, current: Iterable[tuple[str, str]]) -> list[ConfigurationStatus]:
    """The status of each ``(name, current partition key)``, failing first, then by name."""
    keys = store.partitions()
    out = []
    for name, key in current:
        own = _gated(store, key)
        if own is not None:
            batch, report = own
            acc = _accuracy(store, key, batch.batch_id)
            out.append(ConfigurationStatus(name, key, gate_state(report), key, batch.batch_id, *acc))
            continue
        earlier = [g for k in keys if k != key and k.rsplit("@", 1)[0] == name
                   for g in [_gated(store, k)] if g is not None]
        latest = max(earlier, key=lambda g: batch_order(g[0]), default=None)
        scored = [b for b in reversed(store.batches(key))
                  if store.artifact(key, b.batch_id, bf.SCORECARD).is_file()]
        acc = _accuracy(store, key, scored[0].batch_id) if scored else (None, None, None)
        if latest is not None and gate_state(latest[1]) in ("failed", "inconclusive"):
            batch, report = latest
            out.append(ConfigurationStatus(
                name, key, gate_state(report), batch.partition_key, batch.batch_id,
                *_accuracy(store, batch.partition_key, batch.batch_id),
                note=f"the current version {key} has no gate result yet; the last one, of "
                     f"{batch.partition_key}, {gate_state(report)}"))
            continue
        out.append(ConfigurationStatus(
            name, key, "not evaluated", None, None, *acc,
            note="nothing to compare with yet" if scored else "the current version is not evaluated yet"))
    return sorted(out, key=lambda s: (ORDER[s.gate], s.name))


def status_markdown(statuses: list[ConfigurationStatus]) -> str:
    """A short Markdown summary: one line per configuration, failing first."""
    if not statuses:
        return "No active configuration."
    lines = [f"**{sum(s.gate == 'failed' for s in statuses)} failing** of {len(statuses)} configurations", ""]
    for s in statuses:
        acc = "" if s.accuracy is None else f" — {100 * s.accuracy:.1f}%"
        if s.low is not None and s.high is not None:
            acc += f" [{100 * s.low:.1f}, {100 * s.high:.1f}]"
        note = f" ({s.note})" if s.note else ""
        lines.append(f"- `{s.name}` {s.current_version}: **{s.gate}**{acc}{note}")
    return "\n".join(lines)
