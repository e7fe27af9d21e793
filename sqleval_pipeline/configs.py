"""Configurations of the system under test, and their versions (docs/configurations.md).

A configuration is a YAML file under ``evals/configs/``. Its *version* is a short hash of its
canonical content — the parsed model dumped as sorted JSON, so reformatting or reordering the
YAML changes nothing — *plus the text of every file it points to* (prompt template, glossary
when curation is on, recorded answers). Change a prompt file and the version changes.
The Dagster partition key is ``<name>@<hash8>``.

>>> cfg = Configuration(name="demo", generator={"kind": "baseline"})
>>> cfg.runs, cfg.generator.kind
(3, 'baseline')
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
import os

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sqleval_pipeline.textfiles import parse_yaml
from sqleval_pipeline.errors import InputError, SqlevalError
from sqleval_pipeline.dialect import resolve_dialect, TranspileError
from sqleval_pipeline.project import current
from sqleval_pipeline.semantic import glossary_digest
from sqleval_pipeline.semantic.glossary import GlossaryError

log = logging.getLogger(__name__)

MIN_RUNS = 3
_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,47}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BaselineSettings(_Strict):
    """The embedded deterministic, offline baseline (lexical mapping through the glossary)."""

    kind: Literal["baseline"] = "baseline"


class AnthropicSettings(_Strict):
    kind: Literal["anthropic"] = "anthropic"
    model: str = Field(description="pinned model id, e.g. claude-sonnet-4-5-20250929")
    max_tokens: int = 2048
    thinking: Literal["adaptive", "disabled"] = "adaptive"
    api_key_env: str = "ANTHROPIC_API_KEY"
    base_url: str | None = Field(default=None, description="default: the SDK's; tests use a loopback fake")


class OpenAISettings(_Strict):
    """Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, LM Studio."""

    kind: Literal["openai"] = "openai"
    model: str
    base_url: str | None = Field(default=None, description="e.g. http://127.0.0.1:8000/v1 for vLLM")
    base_url_env: str | None = Field(default=None, description="env var holding the base URL")
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int = 1024
    json_mode: bool = True


class HttpSettings(_Strict):
    """A team's own text-to-SQL service: POST the question, read SQL/refusal from JSON."""

    kind: Literal["http"] = "http"
    url: str | None = None
    url_env: str | None = None
    method: Literal["POST"] = "POST"
    question_field: str = "question"
    extra_body: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    auth_header_env: str | None = Field(default=None, description="env var with an Authorization value")
    sql_path: str = Field(default="sql", description="dotted path to the SQL in the response JSON")
    refusal_path: str | None = Field(default="refusal", description="dotted path to a refusal reason")


class RecordedSettings(_Strict):
    """Replay answers exported from another system: JSONL keyed by case id and run index."""

    kind: Literal["recorded"] = "recorded"
    path: str


class CallableSettings(_Strict):
    """A system that lives in Python: ``package.module:function``."""

    kind: Literal["callable"] = "callable"
    target: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    options: dict[str, Any] = Field(default_factory=dict)


def _http_url(value: str, field: str, example: str) -> str:
    """An ``http(s)://host`` URL without a trailing slash, or an :class:`InputError` naming
    ``field`` (the vendor generators' endpoint settings)."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"{field} {value!r} is not an http(s) URL; write it like {example}")
    return value.strip().rstrip("/")


#: the semantic-model fields of a Cortex Analyst request, of which exactly one is set
CORTEX_MODEL_FIELDS = ("semantic_model_file", "semantic_model", "semantic_view", "semantic_models")


def _stage_path(value: str | None, field: str) -> str | None:
    if value is not None and not (value.startswith("@") and "/" in value):
        raise InputError(f"{field} {value!r} is not a stage path; write the fully qualified "
                         "path of the YAML file on its stage, e.g. \"@db.schema.stage/model.yaml\"")
    return value


class CortexSemanticModelRef(_Strict):
    """One entry of ``semantic_models``: exactly one of a staged file, a view or inline YAML."""

    semantic_model_file: str | None = None
    semantic_view: str | None = None
    inline_semantic_model: str | None = None

    @field_validator("semantic_model_file")
    @classmethod
    def _file(cls, v: str | None) -> str | None:
        return _stage_path(v, "semantic_model_file")

    @model_validator(mode="after")
    def _one(self) -> CortexSemanticModelRef:
        set_ = [k for k in ("semantic_model_file", "semantic_view", "inline_semantic_model")
                if getattr(self, k)]
        if len(set_) != 1:
            raise InputError("each entry of semantic_models sets exactly one of "
                             "semantic_model_file, semantic_view or inline_semantic_model; "
                             f"this one sets {', '.join(set_) or 'none'}")
        return self


class CortexAnalystSettings(_Strict):
    """Snowflake Cortex Analyst (REST ``/api/v2/cortex/analyst/message``), docs/vendor-cortex-analyst.md."""

    kind: Literal["cortex_analyst"] = "cortex_analyst"
    account_url: str = Field(description="https://ORG-ACCOUNT.snowflakecomputing.com")
    token_env: str = Field(default="SNOWFLAKE_TOKEN", min_length=1,
                           description="environment variable holding the bearer token")
    token_type: Literal["PROGRAMMATIC_ACCESS_TOKEN", "KEYPAIR_JWT", "OAUTH"] = Field(
        default="PROGRAMMATIC_ACCESS_TOKEN",
        description="sent as X-Snowflake-Authorization-Token-Type")
    semantic_model_file: str | None = Field(default=None, description="@db.schema.stage/model.yaml")
    semantic_model: str | None = Field(default=None, description="the semantic model YAML, inline")
    semantic_view: str | None = Field(default=None, description="db.schema.semantic_view")
    semantic_models: list[CortexSemanticModelRef] | None = Field(default=None, min_length=1)
    stream: bool = Field(default=False, description="ask for server-sent events")

    @field_validator("account_url")
    @classmethod
    def _account_url(cls, v: str) -> str:
        return _http_url(v, "account_url", "https://ORG-ACCOUNT.snowflakecomputing.com")

    @field_validator("semantic_model_file")
    @classmethod
    def _file(cls, v: str | None) -> str | None:
        return _stage_path(v, "semantic_model_file")

    @model_validator(mode="after")
    def _one_semantic_model(self) -> CortexAnalystSettings:
        set_ = [k for k in CORTEX_MODEL_FIELDS if getattr(self, k)]
        if len(set_) != 1:
            raise InputError(
                "set exactly one of semantic_model_file (a staged YAML file), semantic_model "
                "(inline YAML), semantic_view or semantic_models (a list); this configuration "
                f"sets {' and '.join(set_) if set_ else 'none of them'}")
        return self


class GenieSettings(_Strict):
    """Databricks AI/BI Genie (Conversation API), docs/vendor-genie.md."""

    kind: Literal["genie"] = "genie"
    host: str = Field(description="https://WORKSPACE.cloud.databricks.com")
    token_env: str = Field(default="DATABRICKS_TOKEN", min_length=1,
                           description="environment variable holding the bearer token")
    space_id: str = Field(pattern=r"^[A-Za-z0-9_-]+$", description="the Genie space asked")
    poll_interval_s: float = Field(default=1.0, gt=0, le=60, description="first wait between polls")
    poll_backoff: float = Field(default=2.0, ge=1, le=4, description="each wait is the last times this")
    poll_max_interval_s: float = Field(default=10.0, gt=0, le=60, description="longest wait between polls")
    max_wait_s: float = Field(default=600.0, gt=0, le=3600, description="give up on a message after this")
    fetch_query_result: bool = Field(default=False, description="also fetch the rows Genie's query returned")

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        return _http_url(v, "host", "https://WORKSPACE.cloud.databricks.com")

    @model_validator(mode="after")
    def _intervals(self) -> GenieSettings:
        if self.poll_max_interval_s < self.poll_interval_s:
            raise InputError(f"poll_max_interval_s ({self.poll_max_interval_s:g}) is below "
                             f"poll_interval_s ({self.poll_interval_s:g}); raise it or lower "
                             "poll_interval_s")
        return self


GeneratorSettings = Annotated[
    BaselineSettings | AnthropicSettings | OpenAISettings | HttpSettings | RecordedSettings
    | CallableSettings | CortexAnalystSettings | GenieSettings,
    Field(discriminator="kind"),
]

#: the generator kinds, each the ``kind:`` of one settings class above
GENERATOR_KINDS = ("baseline", "anthropic", "openai", "http", "recorded", "callable",
                   "cortex_analyst", "genie")
#: the vendor generators and the dialect their SQL is written in
VENDOR_DIALECTS = {"cortex_analyst": "snowflake", "genie": "databricks"}


class ContextSettings(_Strict):
    """What a model-backed system sees besides the question."""

    prompt_template: str = "evals/prompts/text_to_sql_v1.j2"
    retrieval_k: int = Field(default=6, ge=0, le=50)
    curation: bool = Field(default=True, description="feed the curated glossary (semantic layer)")
    few_shot_examples: int = Field(default=3, ge=0, le=20)
    sample_values: int = Field(default=3, ge=0, le=10)


class Pricing(_Strict):
    """The price of asking the system one question (``pricing:``): per million input and
    output tokens, plus a fixed price per request. Not part of the version: it changes what
    an answer costs, not what the system answers.

    >>> Pricing(input_per_million_tokens=3.0, output_per_million_tokens=15.0).currency
    'USD'
    """

    currency: str = Field(default="USD", description="ISO 4217 code, e.g. USD, EUR")
    input_per_million_tokens: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    output_per_million_tokens: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    per_request: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                               description="charged once per question asked")

    @field_validator("currency", mode="before")
    @classmethod
    def _currency(cls, v: Any) -> Any:
        if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z]{3}", v.strip()):
            raise InputError(f"{v!r} is not a currency code: write three letters, e.g. USD or EUR")
        return v.strip().upper()


class GateSettings(_Strict):
    """Limits the regression gate checks on the candidate's own scorecard (``gate:``), besides
    comparing it with earlier ones. Unset: not checked. Not part of the version."""

    max_p95_latency_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                            description="fail when the p95 latency per question "
                                            "is above this many seconds")
    max_cost_per_question: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                                description="fail when the mean cost per question "
                                                "(in pricing.currency) is above this")

    @property
    def any(self) -> bool:
        """True when a limit is set."""
        return self.max_p95_latency_s is not None or self.max_cost_per_question is not None


class Configuration(_Strict):
    name: str = Field(pattern=_NAME_RE)
    description: str = ""
    generator: GeneratorSettings
    context: ContextSettings = Field(default_factory=ContextSettings)
    allow_fewer_runs: bool = Field(default=False, description="explicit override of the 3-run floor")
    runs: int = Field(default=MIN_RUNS, ge=1, le=100)
    concurrency: int = Field(default=4, ge=1, le=256)
    timeout_s: float = Field(default=60.0, gt=0, description="per provider call")
    max_retries: int = Field(default=4, ge=0, le=10)
    guard: dict[str, Any] = Field(default_factory=dict, description="guard policy overrides")
    dialect: str | None = Field(default=None, description="SQL dialect the system answers in "
                                "(snowflake, bigquery, postgres, …): transpiled to DuckDB with "
                                "sqlglot before the guard; both texts are stored")
    judge: Literal["rules", "llm", "none"] = "rules"
    test_suite: bool = Field(default=True, description="also run an answer right on the pinned "
                             "snapshot on its case's neighbour databases (docs/test-suite.md): one "
                             "that differs there is WRONG (accidental_match); false: grade on the "
                             "snapshot alone")
    judge_model: str | None = None
    judge_sees_rows: bool = Field(default=True, description="false: the LLM judge is sent the "
                                  "questions, SQL texts and a row-free description of the "
                                  "difference (shapes, column names, counts), never row values")
    active: bool = Field(default=True, description="re-evaluated by the nightly schedule")
    baseline: str | None = Field(default=None, description="name of the configuration to diff and gate against")
    tuned_on_dev: bool = Field(default=False, description="label dev accuracy as tuned")
    tuned_on_heldout: bool = Field(default=False, description="label held-out accuracy as tuned "
                                   "too (its cases were read while the system was built)")
    pricing: Pricing | None = Field(default=None, description="price table: the scorecard's "
                                    "cost per question")
    gate: GateSettings = Field(default_factory=GateSettings, description="limits checked on the "
                               "candidate's scorecard (p95 latency, cost per question)")

    @field_validator("runs")
    @classmethod
    def _runs(cls, v: int, info: ValidationInfo) -> int:
        if v < MIN_RUNS and not info.data.get("allow_fewer_runs"):
            raise InputError(
                f"{v} is below the floor of {MIN_RUNS} (one run has no error bar, spread or "
                "flip rate); set allow_fewer_runs: true to override deliberately"
            )
        return v

    @field_validator("gate")
    @classmethod
    def _gate(cls, v: GateSettings, info: ValidationInfo) -> GateSettings:
        if v.max_cost_per_question is not None and info.data.get("pricing") is None:
            raise InputError("max_cost_per_question needs a price table to compute a cost: add "
                             "pricing: {currency: USD, input_per_million_tokens: …, "
                             "output_per_million_tokens: …}, or remove the threshold")
        return v

    @field_validator("dialect")
    @classmethod
    def _dialect(cls, v: str | None) -> str | None:
        if v is None:
            return None

        try:
            return resolve_dialect(v)
        except TranspileError as exc:
            raise InputError(str(exc)) from None

    @model_validator(mode="after")
    def _check(self) -> Configuration:
        if self.runs < MIN_RUNS:
            log.warning("configuration %s runs each case only %d time(s): no reliable spread or "
                        "flip rate", self.name, self.runs)
        model = getattr(self.generator, "model", None)
        if self.judge == "llm" and self.judge_model and model and self.judge_model == model:
            raise InputError("judge_model must differ from the model that generates the SQL")
        return self

    # --- files the configuration depends on ---------------------------------------------

    def referenced_files(self, root: Path) -> dict[str, Path]:
        """Files (relative to the project directory ``root``) whose text is part of the
        version. The glossary is versioned by its content instead (:func:`config_version`)."""
        files: dict[str, Path] = {}
        if self.generator.kind in ("anthropic", "openai"):
            files["prompt_template"] = root / self.context.prompt_template
        if self.generator.kind == "recorded":
            files["recorded"] = root / self.generator.path
        return files


class LoadedConfig(BaseModel):
    """A configuration with where it came from and its version."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: Configuration
    path: Path
    version: str
    #: content hashes of what the version covers besides the fields (prompt template,
    #: recorded answers, glossary): what a diff names when they differ
    input_digests: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def partition_key(self) -> str:
        return f"{self.config.name}@{self.version}"

    @property
    def provider(self) -> str | None:
        """The model provider this configuration's runs call, as the run tag
        ``sqleval/provider`` names it (the run queue limits runs per provider); None for an
        offline generator."""
        return provider_of(self.config.generator)

    @property
    def run_tags(self) -> dict[str, str]:
        """The tags every evaluation run of this configuration carries (its provider)."""
        return {PROVIDER_TAG: self.provider} if self.provider else {}


#: the run tag naming the model provider a run calls (the run queue's per-provider limit)
PROVIDER_TAG = "sqleval/provider"


def provider_of(generator: Any) -> str | None:
    """``anthropic`` (or ``anthropic:<host>`` off the SDK's default), ``openai:<host>``,
    ``http:<host>``, ``cortex_analyst:<host>``, ``genie:<host>``; None for offline generators
    (baseline, recorded, callable). A URL held in an environment variable is read from it;
    unset, the variable's name stands in.

    >>> provider_of(OpenAISettings(model="m", base_url="http://127.0.0.1:8000/v1"))
    'openai:127.0.0.1:8000'
    >>> provider_of(AnthropicSettings(model="m")), provider_of(BaselineSettings())
    ('anthropic', None)
    """
    kind = generator.kind
    if kind == "anthropic":
        return f"anthropic:{urlsplit(generator.base_url).netloc}" if generator.base_url else "anthropic"
    if kind in ("openai", "http"):
        url = generator.base_url if kind == "openai" else generator.url
        env = generator.base_url_env if kind == "openai" else generator.url_env
        if not url and env:
            url = os.environ.get(env) or f"//${env}"
        host = urlsplit(url).netloc if url else ("api.openai.com" if kind == "openai" else "unset")
        return f"{kind}:{host}"
    if kind in ("cortex_analyst", "genie"):
        url = generator.account_url if kind == "cortex_analyst" else generator.host
        return f"{kind}:{urlsplit(url).netloc}"
    return None


class ConfigError(SqlevalError, ValueError):
    """A configuration file is invalid; the message names the file and the field."""


#: fields that do not change what the system under test answers
NON_DEFINING_FIELDS = ("description", "active", "concurrency", "timeout_s", "max_retries",
                       "judge", "test_suite", "judge_model", "judge_sees_rows", "baseline", "tuned_on_dev",
                       "tuned_on_heldout", "pricing", "gate")


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_version(config: Configuration, root: Path,
                   glossary_digest: str | None = None) -> str:
    """8 hex digits over the canonical configuration, the text of its referenced files and,
    with curation on, the content of the glossary it feeds (``glossary_digest``).

    Only what defines the system under test and how its answers are executed counts
    (generator and its settings, context, runs, guard overrides). Operational and reporting
    fields (:data:`NON_DEFINING_FIELDS`) are excluded, so turning a configuration off, running
    it faster, retrying more or changing its judge or gate baseline keeps its version.
    """
    content = config.model_dump(mode="json", exclude=set(NON_DEFINING_FIELDS))
    h = hashlib.sha256(canonical_json(content).encode())
    for label, path in sorted(config.referenced_files(root).items()):
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{label} file {path} referenced by configuration "
                              f"'{config.name}' does not exist") from None
        h.update(f"\n{label}\n".encode())
        h.update(hashlib.sha256(text).digest())
    if config.context.curation:
        h.update(f"\nglossary\n{glossary_digest or 'none'}".encode())
    return h.hexdigest()[:8]


def load_config(path: Path, root: Path | None = None, *, project: Any = None) -> LoadedConfig:
    """Load and version one configuration file; errors name the file, line and field.

    Paths in it are relative to the project directory (``root``, default: the current
    project's); with curation on, the project's glossary content is part of the version."""
    if project is None and root is None:
        project = current()
    if root is None:
        root = project.root
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    config = _parsed(path, text)
    digest = None
    if config.context.curation and project is not None:
        try:
            digest = glossary_digest(project)
        except GlossaryError as exc:
            raise ConfigError(f"{path}: field 'context.curation' is on but the project's "
                              f"glossary cannot be loaded: {exc}") from exc
    return LoadedConfig(config=config, path=path, version=config_version(config, root, digest),
                        input_digests=input_digests(config, root, digest))


#: validated configurations by (file, text): a run loads its configurations many times, and
#: the same text always gives the same configuration (a copy is handed out each time)
_PARSED: dict[tuple[str, str], Configuration] = {}


def _parsed(path: Path, text: str) -> Configuration:
    key = (str(path), text)
    if key in _PARSED:
        return _PARSED[key].model_copy(deep=True)
    doc = parse_yaml(path, text, ConfigError)
    data = doc.data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a configuration is a YAML mapping (name:, generator:, ...)")
    try:
        config = Configuration.model_validate(data)
    except ValidationError as exc:
        msgs = []
        for e in exc.errors():
            loc = list(e["loc"])
            # drop the discriminator tag pydantic adds (generator.anthropic.model -> generator.model)
            if len(loc) >= 2 and loc[0] == "generator" and loc[1] in GENERATOR_KINDS:
                loc = [loc[0], *loc[2:]]
            msgs.append(doc.field_error(loc, e["msg"]))
        raise ConfigError("\n".join(msgs)) from exc
    vendor_dialect = VENDOR_DIALECTS.get(config.generator.kind)
    if vendor_dialect and config.dialect != vendor_dialect:  # said once per file, when it is read
        log.warning("%s: the %s generator answers in %s SQL but dialect is %s; set dialect: %s",
                    path, config.generator.kind, vendor_dialect, config.dialect or "unset (duckdb)",
                    vendor_dialect)
    if len(_PARSED) >= 256:
        _PARSED.clear()
    _PARSED[key] = config
    return config.model_copy(deep=True)


def input_digests(config: Configuration, root: Path, glossary: str | None) -> dict[str, str]:
    """label → 12 hex digits of each referenced file's content (and of the glossary)."""
    out = {label: hashlib.sha256(path.read_bytes()).hexdigest()[:12]
           for label, path in sorted(config.referenced_files(root).items())}
    if config.context.curation:
        out["glossary"] = (glossary or "none")[:12]
    return out


def load_configs(directory: Path | None = None, *, project: Any = None,
                 errors: list[str] | None = None) -> list[LoadedConfig]:
    """Every configuration of a folder (default: the current project's). With ``errors``
    a broken file is reported there and the others still load; without, it raises."""
    if project is None:
        project = current()
    directory = directory or project.configs_dir
    configs = []
    for p in sorted(directory.glob("*.yaml")):
        try:
            configs.append(load_config(p, project.root, project=project))
        except ConfigError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    # a name is used once: the later file (in file-name order) is the error, the first and
    # every other configuration still load (with ``errors``; without, it raises)
    names: dict[str, Path] = {}
    kept = []
    for c in configs:
        if c.name in names:
            message = (f"{c.path}: field 'name': configuration name '{c.name}' is already used by "
                       f"{names[c.name]}; give this file another name (its version would be confused "
                       "with the other's scorecards)")
            if errors is None:
                raise ConfigError(message)
            errors.append(message)
            continue
        names[c.name] = c.path
        kept.append(c)
    return kept
