"""What changed between two evaluations: every input that can move a number, named.

A diff that says "accuracy dropped 12 points" is half an answer; the other half is *why the
two numbers may differ at all*. Each batch records the inputs it was made from
(:class:`RunInputs`, ``inputs.json`` in the batch folder); :func:`what_changed` lists those
that differ, in a fixed order: data first (snapshot, golden set), then the rules that turn
answers into numbers (grader, judge, guard policy), then the system under test (configuration
fields and the files its version covers), then what the provider reported, then the batch.

>>> a = RunInputs(partition_key="b@1", config_name="b", config_version="1", batch_id="x",
...               snapshot_id="s1", golden_hash="g", grader_version="r3",
...               configuration={"generator": {"kind": "openai", "model": "gpt-a"}, "runs": 3})
>>> b = a.model_copy(update={"config_version": "2", "batch_id": "y", "partition_key": "b@2",
...     "configuration": {"generator": {"kind": "openai", "model": "gpt-b"}, "runs": 3}})
>>> [c.field for c in what_changed(a, b)]
['configuration version', 'generator.model', 'batch']
>>> str(what_changed(a, b)[1])
'generator.model: gpt-a → gpt-b'
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field
from sqleval_pipeline.pipeline import batch_files as bf

INPUTS_FILE = bf.INPUTS


class RunInputs(BaseModel):
    """Everything a batch's numbers depend on (None: not recorded by the batch)."""

    partition_key: str
    config_name: str
    config_version: str
    batch_id: str | None = None
    snapshot_id: str | None = None
    golden_hash: str | None = None
    grader_version: str | None = None
    judge_versions: dict[str, str] = Field(default_factory=dict, description="judge → version")
    policy_version: str | None = None
    #: the configuration's fields as evaluated (a dict of its YAML; None: not recorded)
    configuration: dict[str, Any] | None = None
    #: content hashes of the files the version covers (prompt template, glossary, recorded)
    input_digests: dict[str, str] = Field(default_factory=dict)
    #: model strings the provider reported on the answers
    provider_models: list[str] = Field(default_factory=list)


class Change(BaseModel):
    field: str
    baseline: str
    candidate: str

    def __str__(self) -> str:
        return f"{self.field}: {self.baseline} → {self.candidate}"


def _text(v: Any) -> str:
    if v is None:
        return "unrecorded"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    return str(v)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping → dotted keys (lists and scalars are leaves).

    >>> flatten({"a": {"b": 1, "c": [2]}, "d": None})
    {'a.b': 1, 'a.c': [2], 'd': None}
    """
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


#: configuration fields that describe rather than define (never a reason numbers differ)
_DESCRIPTIVE = ("description", "active", "baseline", "concurrency")


def what_changed(base: RunInputs, cand: RunInputs) -> list[Change]:
    """The inputs that differ between two evaluations, data first."""
    out: list[Change] = []

    def add(name: str, a: Any, b: Any) -> None:
        if a != b:
            out.append(Change(field=name, baseline=_text(a), candidate=_text(b)))

    add("snapshot", base.snapshot_id, cand.snapshot_id)
    add("golden set", base.golden_hash, cand.golden_hash)
    add("grader version", base.grader_version, cand.grader_version)
    # a judge's version is known only from a batch's diagnoses: a batch with no failure to
    # diagnose records none, and that is not a judge change (which judges run is a
    # configuration field, compared below)
    for judge in sorted(base.judge_versions.keys() & cand.judge_versions.keys()):
        add(f"judge {judge}", base.judge_versions[judge], cand.judge_versions[judge])
    add("guard policy", base.policy_version, cand.policy_version)
    add("configuration name", base.config_name, cand.config_name)
    add("configuration version", base.config_version, cand.config_version)
    if base.configuration is not None and cand.configuration is not None:
        fa, fb = flatten(base.configuration), flatten(cand.configuration)
        for key in sorted(fa.keys() | fb.keys()):
            if key.split(".")[0] in _DESCRIPTIVE or key == "name":
                continue
            add(key, fa.get(key), fb.get(key))
    elif base.config_version != cand.config_version:  # a batch made before inputs.json
        add("configuration fields", "recorded" if base.configuration else None,
            "recorded" if cand.configuration else None)
    for label in sorted(base.input_digests.keys() | cand.input_digests.keys()):
        add(f"{label} (content)", base.input_digests.get(label), cand.input_digests.get(label))
    add("provider-reported model", base.provider_models or None, cand.provider_models or None)
    add("batch", base.batch_id, cand.batch_id)
    return out
