"""The curated business glossary (``dbt_project/glossary.yml``): model and loader."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqleval_pipeline.paths import GLOSSARY_PATH

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


def load_glossary(path: Path = GLOSSARY_PATH) -> Glossary:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GlossaryError(f"{path}: glossary file not found") from None
    except yaml.YAMLError as exc:
        raise GlossaryError(f"{path}: not valid YAML: {exc}") from exc
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
