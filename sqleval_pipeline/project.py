"""A sqleval project: ``sqleval.yaml`` names the user's dbt project, what is served, the
as-of date and where the evaluation files live. Everything else is derived from it.

The bundled commerce demo is one such project (``sqleval.yaml`` at the repository root); the
core knows nothing about it. Every path in the file is relative to the file's directory, so
two projects never share pins, golden sets or build outputs.

Which project a command works on: ``--project DIR`` (or a ``sqleval.yaml`` path), else the
``SQLEVAL_PROJECT`` environment variable, else the current directory when it holds a
``sqleval.yaml``, else (in a checkout of the repository only) the bundled demo. An installed
wheel has no default project: ``sqleval init`` makes one, ``sqleval demo DIR`` writes the demo.

>>> spec = ProjectSpec.model_validate({"name": "x", "as_of": "2024-06-30"})
>>> spec.dbt.warehouse, spec.serve.schema_name, spec.validation, spec.paths.golden
('build', 'main', 'dbt_tests', 'evals/golden')
"""

from __future__ import annotations

import datetime as dt
import os
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sqleval_pipeline import paths
from sqleval_pipeline.demo.location import checkout_project
from sqleval_pipeline.textfiles import parse_yaml
from sqleval_pipeline.errors import InputError, SqlevalError

PROJECT_FILE = "sqleval.yaml"
ENV_VAR = "SQLEVAL_PROJECT"

#: the demo's difficulty taxonomy, the default of every project
DEFAULT_DIFFICULTIES: tuple[str, ...] = (
    "simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k", "trap",
)
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ProjectError(SqlevalError, ValueError):
    """``sqleval.yaml`` is missing or invalid; the message names file, line, field and fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DbtSettings(_Strict):
    project_dir: str = Field("dbt_project", description="the dbt project (holds dbt_project.yml)")
    profiles_dir: str | None = Field(
        None, description="where profiles.yml is; default: the dbt project dir if it has one, "
                          "else ~/.dbt (DBT_PROFILES_DIR is honoured)")
    profile: str | None = Field(None, description="default: the profile dbt_project.yml names")
    target: str | None = Field(None, description="default: the profile's own target")
    warehouse: Literal["build", "profile"] = Field(
        "build", description="build: sqleval builds the warehouse in its build directory with "
        "your profile's settings and only the path changed; profile: use the DuckDB file your "
        "resolved target names, as is")


class ServeSettings(_Strict):
    select: str | None = Field(None, description="dbt selection of the served models "
                               "(--select syntax); default: every model of the project")
    exclude: str | None = Field(None, description="dbt --exclude syntax")
    schema_name: str = Field("main", alias="schema",
                             description="the schema the system under test sees the tables in")

    @field_validator("schema_name")
    @classmethod
    def _schema(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise InputError("a schema name is letters, digits and '_'")
        return v.lower()


class RawDataStep(_Strict):
    """An optional step before dbt that fills the warehouse's source tables."""

    python: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                               description="module:function(raw_dir, warehouse) -> {table: rows}")
    command: list[str] | None = Field(None, description="argv; {raw_dir} and {warehouse} are "
                                      "substituted; runs in the project directory")

    @model_validator(mode="after")
    def _one(self) -> RawDataStep:
        if (self.python is None) == (self.command is None):
            raise InputError("give exactly one of 'python' or 'command'")
        return self


class Taxonomy(_Strict):
    difficulties: list[str] = Field(default_factory=lambda: list(DEFAULT_DIFFICULTIES))
    clusters: list[str] | None = Field(None, description="allowed clusters; default: any name")
    default_cluster: str = "general"

    @field_validator("difficulties")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        if not v:
            raise InputError("declare at least one difficulty")
        if len(set(v)) != len(v):
            raise InputError("difficulties are listed twice")
        return v


class JudgingSettings(_Strict):
    """When a judge's failure categories may be trusted (docs/project.md)."""

    min_labels: int = Field(20, ge=1, description="labelled attempts a judge needs")
    min_kappa: float = Field(0.6, ge=-1, le=1, description="Cohen's kappa a judge needs")


class OrchestrationSettings(_Strict):
    """How many evaluations the Dagster run queue starts at once (docs/project.md)."""

    max_concurrent_runs: int = Field(4, ge=1, description="runs the queue keeps in progress")
    runs_per_provider: int = Field(1, ge=1, description="runs in progress per model provider "
                                   "(tag sqleval/provider): one provider's rate limit is "
                                   "shared by every run that calls it")


class StorageSettings(_Strict):
    """Where finished results are shared (docs/scaling.md)."""

    remote: str | None = Field(None, description="fsspec URL of the shared store "
                               "(s3://bucket/prefix, gs://…, a shared folder); default: none")
    remote_env: str | None = Field(None, description="environment variable holding that URL "
                                   "(wins over remote when set)")

    def url(self) -> str | None:
        return (os.environ.get(self.remote_env) if self.remote_env else None) or self.remote


class ProjectPaths(_Strict):
    golden: str = "evals/golden"
    configs: str = "evals/configs"
    guard_policy: str = "evals/guard_policy.yaml"
    glossary: str | None = Field(None, description="hand-written glossary (overrides the "
                                 "terms derived from the dbt semantic layer)")
    decisions: str = "evals/decisions.yaml"
    labels: str = "evals/labels"
    hostile: list[str] | None = Field(None, description="hostile case files; default: the "
                                      "bundled suite instantiated over your served tables")
    snapshots: str = Field("snapshots", description="pinned snapshot id and manifests")
    build: str = Field(".sqleval", description="build outputs (warehouse, snapshot files, "
                       "Dagster instance, results); SQLEVAL_HOME overrides it")


class ProjectSpec(_Strict):
    version: Literal[1] = 1
    name: str = Field(pattern=_NAME)
    description: str = ""
    dbt: DbtSettings = Field(default_factory=DbtSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    as_of: dt.date = Field(description="the snapshot's as-of date: 'today' for every relative "
                           "time window and for the pinned clock")
    sensitive_schemas: list[str] = Field(default_factory=list)
    raw_data: RawDataStep | None = None
    validation: str = Field("dbt_tests", description="dbt_tests (derived from the dbt tests on "
                            "the served models), none, or a path to an expectations YAML file")
    taxonomy: Taxonomy = Field(default_factory=Taxonomy)
    judging: JudgingSettings = Field(default_factory=JudgingSettings)
    orchestration: OrchestrationSettings = Field(default_factory=OrchestrationSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    paths: ProjectPaths = Field(default_factory=ProjectPaths)

    @field_validator("sensitive_schemas")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [s.lower() for s in v]


class Project:
    """A loaded project: the spec plus absolute paths resolved against its directory."""

    def __init__(self, spec: ProjectSpec, file: Path):
        self.spec = spec
        self.file = file.resolve()
        self.root = self.file.parent

    def __repr__(self) -> str:
        return f"Project({self.spec.name!r}, {self.file})"

    def path(self, rel: str | None) -> Path | None:
        if rel is None:
            return None
        p = Path(os.path.expandvars(os.path.expanduser(rel)))
        return p if p.is_absolute() else (self.root / p).resolve()

    # --- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def as_of(self) -> dt.date:
        return self.spec.as_of

    # --- dbt ----------------------------------------------------------------------------
    @property
    def dbt_project_dir(self) -> Path:
        return self.path(self.spec.dbt.project_dir)  # type: ignore[return-value]

    @property
    def user_profiles_dir(self) -> Path:
        """Where the user's profiles.yml is (dbt's own search order)."""
        if self.spec.dbt.profiles_dir:
            return self.path(self.spec.dbt.profiles_dir)  # type: ignore[return-value]
        if (self.dbt_project_dir / "profiles.yml").exists():
            return self.dbt_project_dir
        if os.environ.get("DBT_PROFILES_DIR"):
            return Path(os.environ["DBT_PROFILES_DIR"]).expanduser().resolve()
        return Path.home() / ".dbt"

    @cached_property
    def dbt_project_yml(self) -> dict[str, Any]:
        f = self.dbt_project_dir / "dbt_project.yml"
        try:
            text = f.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ProjectError(
                f"{self.file}: field 'dbt.project_dir': no dbt project at {self.dbt_project_dir} "
                "(dbt_project.yml not found); point dbt.project_dir at your dbt project"
            ) from None
        data = parse_yaml(f, text, ProjectError).data or {}
        if not isinstance(data, dict) or "name" not in data:
            raise ProjectError(f"{f}: not a dbt project file (no 'name')")
        return data

    @property
    def dbt_profile_name(self) -> str:
        name = self.spec.dbt.profile or self.dbt_project_yml.get("profile")
        if not name:
            raise ProjectError(f"{self.file}: field 'dbt.profile': dbt_project.yml names no "
                               "profile; set dbt.profile")
        return name

    @property
    def models_dir(self) -> Path:
        """The dbt project's first model path (where its property files are)."""
        paths_ = self.dbt_project_yml.get("model-paths") or ["models"]
        return self.dbt_project_dir / paths_[0]

    @property
    def dbt_target_dir(self) -> Path:
        """dbt's target path: inside the build directory, never the user's dbt project (a stale
        manifest there must not leak into sqleval)."""
        return self.home.root / "dbt_target"

    # --- evaluation files -------------------------------------------------------------------
    @property
    def golden_dir(self) -> Path:
        return self.path(self.spec.paths.golden)  # type: ignore[return-value]

    @property
    def configs_dir(self) -> Path:
        return self.path(self.spec.paths.configs)  # type: ignore[return-value]

    @property
    def guard_policy_path(self) -> Path:
        return self.path(self.spec.paths.guard_policy)  # type: ignore[return-value]

    @property
    def glossary_path(self) -> Path | None:
        return self.path(self.spec.paths.glossary)

    @property
    def decisions_path(self) -> Path:
        return self.path(self.spec.paths.decisions)  # type: ignore[return-value]

    @property
    def labels_dir(self) -> Path:
        return self.path(self.spec.paths.labels)  # type: ignore[return-value]

    @property
    def hostile_files(self) -> list[Path] | None:
        h = self.spec.paths.hostile
        return [self.path(p) for p in h] if h else None  # type: ignore[misc]

    @property
    def manifest_dir(self) -> Path:
        return self.path(self.spec.paths.snapshots)  # type: ignore[return-value]

    @property
    def home(self) -> paths.Home:
        env = os.environ.get("SQLEVAL_HOME")
        root = Path(env).expanduser().resolve() if env else self.path(self.spec.paths.build)
        return paths.Home(root)  # type: ignore[arg-type]

    @property
    def validation_file(self) -> Path | None:
        v = self.spec.validation
        return None if v in ("dbt_tests", "none") else self.path(v)

    @property
    def difficulties(self) -> tuple[str, ...]:
        return tuple(self.spec.taxonomy.difficulties)

    @property
    def taxonomy(self) -> dict[str, tuple[str, ...] | None]:
        """Keyword arguments of :func:`~sqleval_pipeline.golden.loader.load_golden`."""
        clusters = self.spec.taxonomy.clusters
        return {"difficulties": self.difficulties,
                "clusters": tuple(clusters) if clusters is not None else None}

    def default_golden_file(self) -> Path:
        """Where new cases go: the only golden file, else ``<golden>/<project name>.jsonl``."""
        files = sorted(self.golden_dir.glob("*.jsonl")) if self.golden_dir.is_dir() else []
        if len(files) == 1:
            return files[0]
        return self.golden_dir / f"{re.sub(r'[^a-z0-9_-]+', '_', self.name.lower())}.jsonl"


# ---- loading ----------------------------------------------------------------------------------


def load_project(location: Path | str) -> Project:
    """Load ``sqleval.yaml`` (or the one in a directory); errors name file:line and field."""
    p = Path(location).expanduser()
    file = p / PROJECT_FILE if p.is_dir() else p
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProjectError(f"no {PROJECT_FILE} at {file}: create one with `sqleval init "
                           f"{p} --dbt-project PATH`") from None
    cached = _SPECS.get((str(file), text))
    if cached is not None:  # the same text always gives the same project (a copy each time)
        return Project(cached.model_copy(deep=True), file)
    doc = parse_yaml(file, text, ProjectError)
    data = doc.data
    if not isinstance(data, dict):
        raise ProjectError(f"{file}: a project file is a YAML mapping (name:, dbt:, serve:, as_of:)")
    try:
        spec = ProjectSpec.model_validate(data)
    except ValidationError as exc:
        msgs = []
        for e in exc.errors():
            loc = tuple(x for x in e["loc"] if x not in ("function-after",))
            hint = {"missing": "add it", "extra_forbidden": "remove it or fix its spelling",
                    "literal_error": "use one of the allowed values"}.get(e["type"], "")
            msgs.append(doc.field_error(loc, e["msg"] + (f" — {hint}" if hint else ""),
                                        default_line=1))
        raise ProjectError("\n".join(msgs)) from exc
    if len(_SPECS) >= 64:
        _SPECS.clear()
    _SPECS[(str(file), text)] = spec
    return Project(spec.model_copy(deep=True), file)


#: validated project files by (file, text): a run reads its project file many times
_SPECS: dict[tuple[str, str], ProjectSpec] = {}


_selected: Path | None = None


def select(location: Path | str | None) -> None:
    """Make ``location`` the project of this process (the CLI's ``--project``)."""
    global _selected
    _selected = Path(location).expanduser().resolve() if location else None
    current.cache_clear()


def locate() -> Path:
    """The project file this process works on (see module doc for the order)."""
    if _selected is not None:
        return _selected
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    here = Path.cwd() / PROJECT_FILE
    if here.exists():
        return here
    demo = checkout_project()
    if demo is None:
        raise ProjectError(f"no {PROJECT_FILE} in {Path.cwd()} and no --project: create a project "
                           f"with `sqleval init DIR --dbt-project PATH`, or write the demo with "
                           f"`sqleval demo DIR`, then pass --project DIR (or cd into it)")
    return demo


from functools import lru_cache  # noqa: E402


@lru_cache(maxsize=4)
def _load_cached(location: Path, mtime: float) -> Project:
    return load_project(location)


def current() -> Project:
    loc = locate()
    file = loc / PROJECT_FILE if loc.is_dir() else loc
    try:
        mtime = file.stat().st_mtime
    except FileNotFoundError:
        mtime = 0.0
    return _load_cached(loc, mtime)


current.cache_clear = _load_cached.cache_clear  # type: ignore[attr-defined]
