"""The curated business glossary (the "semantic layer" a curated configuration feeds the
system under test): model and loader. The project's effective glossary is
:func:`sqleval_pipeline.semantic.project_glossary`.

A project's glossary comes from its dbt semantic layer (semantic models and metrics, see
:mod:`sqleval_pipeline.semantic`) when it has one, overridden and extended term by term by
the hand-written file ``paths.glossary`` names in ``sqleval.yaml`` (optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqleval_pipeline.textfiles import parse_yaml

from sqleval_pipeline.errors import SqlevalError

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


class GlossaryError(SqlevalError, ValueError):
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
