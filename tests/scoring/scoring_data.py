"""Hand-written grades shared by the scoring tests."""

from __future__ import annotations

from sqleval_pipeline.pipeline.records import Grade

META = {
    "q1": ("answerable", "simple_aggregate", "dev", "c1"),
    "q2": ("answerable", "top_k", "dev", "c1"),
    "q3": ("needs_definition", "filtered_aggregate", "heldout", "c2"),
    "q4": ("should_refuse", "trap", "heldout", "c3"),
}


def make_grades(config: str, outcomes: dict[str, list[str]], grader: str = "r1-test", snapshot: str = "snap1"):
    out = []
    for cid, outs in outcomes.items():
        band, diff, split, cluster = META[cid]
        for run, o in enumerate(outs):
            reason = {"ERROR": "provider_error:503", "CORRECT": "match"}.get(o, o.lower())
            out.append(Grade(config_version=config, case_id=cid, run_index=run, outcome=o, reason=reason,
                             grader_version=grader, band=band, difficulty=diff, split=split,
                             cluster=cluster, snapshot_id=snapshot))
    return out


BASELINE = {
    "q1": ["CORRECT", "CORRECT", "CORRECT"],
    "q2": ["CORRECT_FACTS", "WRONG", "CORRECT_FACTS"],
    "q3": ["DEFERRED_WRONGLY", "WRONG", "ERROR"],
    "q4": ["DEFERRED_CORRECTLY", "WRONG", "DEFERRED_CORRECTLY"],
}
CANDIDATE = {
    "q1": ["WRONG", "WRONG", "CORRECT"],
    "q2": ["CORRECT", "CORRECT", "CORRECT"],
    "q3": ["CORRECT", "CORRECT", "WRONG"],
    "q4": ["DEFERRED_CORRECTLY", "DEFERRED_CORRECTLY", "DEFERRED_CORRECTLY"],
}


