"""The curated business glossary (the "semantic layer" a curated configuration feeds the
system under test): model, loader, and the project's effective glossary.

A project's glossary comes from its dbt semantic layer (semantic models and metrics, see
:mod:`sqleval_pipeline.semantic`) when it has one, overridden and extended term by term by
the hand-written file ``paths.glossary`` names in ``sqleval.yaml`` (optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqleval_pipeline.textfiles import parse_yaml

import hashlib
from typing import Any

Kind = Literal["metric", "filter", "dimension", "time_window", "refusal"]


class Term(BaseModel):
    model_config = ConfigDict(extra="forbid")

    term: str
    kind: Kind
    aliases: list[str] = Field(default_factory=list)
    definition: str
    sql: str | None = None
    filter: str | None = None
    time_column: str | None = None
    tables: list[str] = Field(default_factory=list)


class Glossary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    as_of_note: str
    terms: list[Term]

    def by_kind(self, kind: str) -> list[Term]:
        return [t for t in self.terms if t.kind == kind]


class GlossaryError(ValueError):
    pass


def load_glossary(path: Path) -> Glossary:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GlossaryError(f"{path}: glossary file not found") from None
    data = parse_yaml(path, text, GlossaryError).data
    try:
        return Glossary.model_validate(data)
    except ValidationError as exc:
        msgs = []
        for err in exc.errors():
            loc = err["loc"]
            where = ".".join(str(x) for x in loc)
            if len(loc) >= 2 and loc[0] == "terms" and isinstance(loc[1], int):
                try:
                    where = f"terms[{loc[1]}] ('{data['terms'][loc[1]]['term']}')." + ".".join(
                        str(x) for x in loc[2:]
                    )
                except (KeyError, IndexError, TypeError):
                    pass
            msgs.append(f"{path}: {where}: {err['msg']}")
        raise GlossaryError("\n".join(msgs)) from exc


def project_glossary(project: Any) -> Glossary | None:
    """The effective glossary of a project (see module doc); None when it has neither a dbt
    semantic layer nor a glossary file."""
    override = None
    if project.glossary_path is not None:
        override = load_glossary(project.glossary_path)
    semantic = None
    try:
        from sqleval_pipeline import semantic as sem
    except ImportError:  # pragma: no cover - the module ships with the package
        sem = None
    if sem is not None and (project.dbt_project_dir / "dbt_project.yml").exists():
        from sqleval_pipeline.warehouse import dbt

        manifest = dbt.load_manifest(project)
        if manifest.get("semantic_models"):
            served = {r.unique_id: r.name for r in dbt.served_selection(project).served}
            built = sem.glossary_from_manifest(manifest, served=served)
            semantic = getattr(built, "glossary", built)
            if isinstance(semantic, tuple):
                semantic = semantic[0]
        if semantic is not None:
            return sem.merge_glossaries(semantic, override)
    return override


def glossary_digest(project: Any) -> str | None:
    """A content hash of the project's effective glossary (part of a curated version)."""
    g = project_glossary(project)
    if g is None:
        return None
    return hashlib.sha256(g.model_dump_json().encode()).hexdigest()[:16]
