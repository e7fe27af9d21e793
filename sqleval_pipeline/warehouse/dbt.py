"""The user's dbt project, driven from a sqleval project: profile, parse, selection of the
served models and of everything that must never be served.

**Where the warehouse is.** With ``dbt.warehouse: build`` (the default) sqleval renders your
profile's target with dbt itself, keeps every setting (extensions, settings, attachments,
threads) and changes only ``path``: the warehouse is ``<build>/warehouse.duckdb``, written
through a generated ``profiles.yml`` in ``<build>/dbt_profiles/``. Your own ``profiles.yml``
and your development database are never touched. With ``dbt.warehouse: profile`` sqleval
uses the DuckDB file your resolved target names, as is (relative paths are relative to the
dbt project directory, as when dbt runs there).

dbt always writes its ``target/`` into ``<build>/dbt_target`` and its logs into
``<build>/logs/dbt``, so a stale manifest in your dbt project can never leak into sqleval's
lineage, and sqleval writes nothing into your dbt project.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from argparse import Namespace

import yaml

from sqleval_pipeline.project import Project, ProjectError
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.textfiles import atomic_path, write_atomically

DBT_ENV = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}


class DbtError(SqlevalError, RuntimeError):
    """A dbt step failed; the message carries dbt's own output and what to do."""


def dbt_executable() -> str:
    exe = Path(sys.executable).parent / "dbt"
    return str(exe) if exe.exists() else "dbt"


def offline_dbt_executable(bin_dir: Path) -> Path:
    """``<bin_dir>/dbt``: dbt, except that ``dbt --version`` alone answers the installed
    version without dbt's online look-up of the latest release (one request per adapter, a
    second's timeout each, before every command dagster-dbt runs: it asks the version first).
    Given to dagster-dbt as its ``dbt_executable``; every other command runs dbt itself.
    Rewritten only when the dbt version or executable changes."""
    # dbt-core (~0.6 s to import): only when the wrapper is written
    from dbt.version import __version__

    real = dbt_executable()
    script = ("#!/bin/sh\n"
              "# written by sqleval: dbt without the online version look-up of `dbt --version`\n"
              f'if [ "$#" -eq 1 ] && [ "$1" = "--version" ]; then echo "Core:"; '
              f'echo "  - installed: {__version__}"; exit 0; fi\n'
              f'exec "{real}" "$@"\n')
    path = bin_dir / "dbt"
    if not path.exists() or path.read_text(encoding="utf-8") != script:
        with atomic_path(path) as tmp:  # executable before it is in place
            tmp.write_text(script, encoding="utf-8")
            tmp.chmod(0o755)
    return path


def dbt_env() -> dict[str, str]:
    return {**os.environ, **DBT_ENV}


# ---- profile ----------------------------------------------------------------------------------


def rendered_target(project: Project) -> dict[str, Any]:
    """The user's resolved target (credentials serialized, env vars rendered), with dbt's
    own profile reader: ``{"profile_name", "target_name", "threads", "credentials"}``."""
    # dbt-core's profile reader (~1.5 s to import): only when a target is resolved
    from dbt.config.profile import Profile, read_profile
    from dbt.config.renderer import ProfileRenderer
    from dbt.flags import set_from_args
    from dbt_common.context import set_invocation_context

    profiles_dir = project.user_profiles_dir
    if not (profiles_dir / "profiles.yml").exists():
        raise ProjectError(f"{project.file}: field 'dbt.profiles_dir': no profiles.yml in "
                           f"{profiles_dir}; set dbt.profiles_dir to the folder holding it")
    set_invocation_context(os.environ)
    set_from_args(Namespace(), None)
    try:
        raw = read_profile(str(profiles_dir))
        profile = Profile.from_raw_profiles(raw, project.dbt_profile_name,
                                            renderer=ProfileRenderer({}),
                                            target_override=project.spec.dbt.target)
    except Exception as exc:  # dbt raises DbtProfileError / DbtProjectError with a message
        raise ProjectError(f"{profiles_dir / 'profiles.yml'}: profile "
                           f"'{project.dbt_profile_name}' cannot be resolved: {exc}") from exc
    info = profile.to_profile_info(serialize_credentials=True)
    creds = info["credentials"]
    if getattr(profile.credentials, "type", None) != "duckdb" and "path" not in creds:
        raise ProjectError(f"{project.file}: profile '{project.dbt_profile_name}' target "
                           f"'{info['target_name']}' is not a dbt-duckdb target; sqleval "
                           "evaluates DuckDB warehouses")
    return info


def warehouse_path(project: Project) -> Path:
    """The DuckDB file dbt builds (see module doc)."""
    if project.spec.dbt.warehouse == "build":
        return project.home.warehouse
    creds = rendered_target(project)["credentials"]
    path = str(creds.get("path") or "")
    if not path or path == ":memory:" or "://" in path:
        raise ProjectError(f"{project.file}: field 'dbt.warehouse': the target's path is "
                           f"{path!r}, not a DuckDB file; use `warehouse: build`")
    p = Path(path).expanduser()
    return p if p.is_absolute() else (project.dbt_project_dir / p).resolve()


def profiles_dir(project: Project) -> Path:
    """The profiles dir dbt is run with: generated in the build dir (``build``) or the
    user's (``profile``)."""
    if project.spec.dbt.warehouse == "profile":
        return project.user_profiles_dir
    out = project.home.root / "dbt_profiles"
    generated = out / "profiles.yml"
    user = project.user_profiles_dir / "profiles.yml"
    if generated.exists() and str(project.home.warehouse) in generated.read_text():
        newest_input = max((f.stat().st_mtime for f in (user, project.file) if f.exists()), default=0)
        if generated.stat().st_mtime >= newest_input:  # rendering imports dbt: seconds
            return out
    try:
        info = rendered_target(project)
        creds = {k: v for k, v in info["credentials"].items()
                 if k not in ("database", "schema", "path") and v not in (None, [], {})}
        threads = info.get("threads") or 1
        schema = info["credentials"].get("schema") or "main"
    except ProjectError:
        if (project.user_profiles_dir / "profiles.yml").exists():
            raise
        creds, threads, schema = {}, 1, "main"  # no profile at all: a plain DuckDB target
    output = {"type": "duckdb", **creds, "path": str(project.home.warehouse), "schema": schema,
              "threads": threads}
    doc = {project.dbt_profile_name: {"target": "sqleval", "outputs": {"sqleval": output}}}
    text = ("# generated by sqleval from your profile; only `path` differs. Do not edit.\n"
            + yaml.safe_dump(doc, sort_keys=True))
    out.mkdir(parents=True, exist_ok=True)
    if not generated.exists() or generated.read_text() != text:
        generated.write_text(text)
    else:
        os.utime(generated)  # rendered again and unchanged: fresh for the check above
    return out


def cli_args(project: Project) -> list[str]:
    """--project-dir/--profiles-dir/--profile/--target for any dbt command of this project."""
    args = ["--project-dir", str(project.dbt_project_dir),
            "--profiles-dir", str(profiles_dir(project))]
    if project.spec.dbt.warehouse == "build":
        args += ["--profile", project.dbt_profile_name, "--target", "sqleval"]
    else:
        if project.spec.dbt.profile:
            args += ["--profile", project.spec.dbt.profile]
        if project.spec.dbt.target:
            args += ["--target", project.spec.dbt.target]
    return args


def run_dbt(project: Project, command: list[str], *, target_path: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
    """Run one dbt command for the project (output captured); raise DbtError on failure."""
    target = target_path or project.dbt_target_dir
    argv = [dbt_executable(), *command, *cli_args(project), "--target-path", str(target),
            "--log-path", str(log_dir(project))]
    proc = subprocess.run(argv, cwd=project.dbt_project_dir, env=dbt_env(),
                          capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise DbtError(f"`dbt {' '.join(command)}` failed in {project.dbt_project_dir}:\n{tail}")
    return proc


# ---- manifest and selection -------------------------------------------------------------------


def log_dir(project: Project) -> Path:
    """dbt's logs go to the build dir too: sqleval never writes into your dbt project."""
    return project.home.root / "logs" / "dbt"


#: dbt's saved parse state in a target path (what lets a later command parse only what changed)
PARTIAL_PARSE_FILE = "partial_parse.msgpack"


def manifest_path(project: Project) -> Path:
    return project.dbt_target_dir / "manifest.json"


def parse(project: Project, *, force: bool = False) -> Path:
    """``dbt parse`` into the build dir when the manifest is missing or older than a file of
    the dbt project (or always with force). Every import of the Dagster definitions needs the
    manifest; a run or a UI reload after an edit re-parses, an unchanged project does not.

    A project with a ``serve.select`` or ``serve.exclude`` is parsed by the ``dbt ls`` that
    resolves that selection (it writes the same manifest, partial-parse state included): one
    dbt process where a parse and then a listing took two (:func:`_selected_ids` reads what it
    listed). When that listing fails, or leaves no fresh manifest, ``dbt parse`` runs (and
    says whether the project parses); the selection's own error is raised where the
    selection is resolved."""
    project.dbt_project_yml  # noqa: B018  (a missing dbt project fails with the field named)
    path = manifest_path(project)

    def stale() -> bool:
        return not path.exists() or _newest_source(project) > path.stat().st_mtime

    if force or stale():
        listed = _has_selection(project) and _list_selection(project, project.dbt_target_dir)[0] is not None
        if not listed or stale():
            run_dbt(project, ["parse", "--quiet"])
    return path


#: what dbt reads when it parses (build outputs such as target/ and logs/ are not sources)
_SOURCE_SUFFIXES = {".sql", ".yml", ".yaml", ".csv", ".md", ".py", ".jinja", ".j2"}


def _newest_source(project: Project) -> float:
    """Modification time of the newest file dbt parses in the project (0 when none)."""
    root = project.dbt_project_dir
    newest = 0.0
    skip = {"target", "logs", "dbt_packages", ".git"}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip and not d.startswith(".")]
        for name in filenames:
            if os.path.splitext(name)[1] in _SOURCE_SUFFIXES:
                newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
    return newest


def load_manifest(project: Project) -> dict[str, Any]:
    return json.loads(parse(project).read_text())


def last_manifest(project: Project) -> Path:
    """The manifest of the last ``dbt parse`` or ``dbt build`` in the build dir, as it is
    (parsed only when there is none yet): what a configuration's version reads the semantic
    layer from, so computing a version never runs dbt on an edited project — the next
    ``sqleval build`` brings it, and the snapshot, up to date together."""
    path = manifest_path(project)
    return path if path.exists() else parse(project)


def _relation_key(database: str | None, schema: str | None, name: str | None) -> tuple[str, str, str]:
    return ((database or "").lower(), (schema or "").lower(), (name or "").lower())


def seeds_read_as_sources(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Seeds that some source of the project points at: ``{seed unique_id: [source unique_ids]}``.

    A model that reads a seed through ``source()`` instead of ``ref()`` has no DAG edge to
    the seed, so one ``dbt build`` may run the model before the seed is loaded. The match is
    made on the relations dbt resolved at parse time — the seed's ``database``/``schema``/
    ``alias`` (after ``+schema`` configs and ``generate_schema_name``) against the source's
    ``database``/``schema``/``identifier`` — case-insensitively, as DuckDB matches names. A
    source that names no database matches a seed of any database."""
    seeds: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for uid, node in manifest.get("nodes", {}).items():
        if node.get("resource_type") == "seed":
            db, schema, name = _relation_key(node.get("database"), node.get("schema"),
                                             node.get("alias") or node.get("name"))
            seeds.setdefault((schema, name), []).append((db, uid))
    found: dict[str, list[str]] = {}
    for sid, src in manifest.get("sources", {}).items():
        db, schema, name = _relation_key(src.get("database"), src.get("schema"),
                                         src.get("identifier") or src.get("name"))
        for seed_db, uid in seeds.get((schema, name), []):
            if not db or not seed_db or db == seed_db:
                found.setdefault(uid, []).append(sid)
    return {uid: sorted(found[uid]) for uid in sorted(found)}


def seed_selector(node: dict[str, Any]) -> str:
    """A dbt selector matching exactly one seed node (its fully qualified name, seeds only).

    >>> seed_selector({"fqn": ["jaffle", "raw_orders"]})
    'resource_type:seed,fqn:jaffle.raw_orders'
    """
    return f"resource_type:seed,fqn:{'.'.join(node['fqn'])}"


@dataclass(frozen=True)
class Relation:
    """One dbt model as a warehouse relation."""

    unique_id: str
    name: str  # the name it is served as (the relation's identifier)
    database: str
    schema: str
    materialized: str

    @property
    def qualified(self) -> str:
        return f'"{self.database}"."{self.schema}"."{self.name}"'


@dataclass
class ServedSelection:
    served: list[Relation]
    #: models of the project that are not served (sensitive by definition)
    unserved: list[Relation]
    #: what the selection named but cannot be served, each with the reason
    skipped: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"served": [asdict(r) for r in self.served],
                "unserved": [asdict(r) for r in self.unserved], "skipped": self.skipped}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ServedSelection:
        return cls([Relation(**r) for r in d["served"]], [Relation(**r) for r in d["unserved"]],
                   list(d["skipped"]))


def _relation(uid: str, node: dict[str, Any]) -> Relation:
    return Relation(uid, node.get("alias") or node["name"], node.get("database") or "",
                    node.get("schema") or "main",
                    (node.get("config") or {}).get("materialized", "view"))


def _has_selection(project: Project) -> bool:
    return bool(project.spec.serve.select or project.spec.serve.exclude)


def _listed_file(project: Project, manifest_file: Path) -> Path:
    """Where the listing that wrote ``manifest_file`` keeps the ids it listed: named by the
    manifest's modification time and size and by the selection, so a later parse, or an edited
    selection, never reads it."""
    st = manifest_file.stat()
    key = hashlib.sha256(json.dumps([st.st_mtime_ns, st.st_size, project.spec.serve.select,
                                     project.spec.serve.exclude]).encode()).hexdigest()[:16]
    return manifest_file.parent / f"sqleval-listed-{key}.json"


def _list_selection(project: Project, target: Path) -> tuple[list[str] | None, str]:
    """``dbt ls`` of the models ``serve.select``/``exclude`` name, into ``target``: (the unique
    ids it listed, or None when dbt failed; the tail of dbt's output). Into the build dir's
    target it is also the project's parse: the ids are then kept beside the manifest it wrote
    (:func:`_listed_file`, the one such file there)."""
    sel, exc = project.spec.serve.select, project.spec.serve.exclude
    command = ["ls", "--quiet", "--resource-type", "model", "--output", "json",
               "--output-keys", "unique_id"]
    if sel:
        command += ["--select", sel]
    if exc:
        command += ["--exclude", exc]
    proc = run_dbt(project, command, target_path=target, check=False)
    if proc.returncode != 0:
        return None, "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
    ids = sorted(json.loads(line)["unique_id"] for line in map(str.strip, proc.stdout.splitlines())
                 if line.startswith("{"))
    if target == project.dbt_target_dir and manifest_path(project).is_file():
        keep = _listed_file(project, manifest_path(project))
        for old in target.glob("sqleval-listed-*.json"):
            if old != keep:
                old.unlink(missing_ok=True)
        write_atomically(keep, json.dumps(ids))
    return ids, ""


def _selected_ids(project: Project, manifest_file: Path, manifest: dict[str, Any]) -> set[str]:
    models = {uid for uid, n in manifest["nodes"].items() if n.get("resource_type") == "model"}
    if not _has_selection(project):
        return models
    listed = _listed_file(project, manifest_file)
    if listed.is_file():  # listed by the `dbt ls` that wrote this manifest (:func:`parse`)
        return set(json.loads(listed.read_text())) & models
    # a target path of its own: `dbt ls` rewrites the manifest it writes there. It parses the
    # project again, from the partial-parse state of the parse that wrote ``manifest`` when
    # there is one (dbt checks that state and parses from scratch when it does not fit): on
    # the demo project 2.2 s instead of 3.5 s
    ls_target = project.dbt_target_dir / "ls"
    state = project.dbt_target_dir / PARTIAL_PARSE_FILE
    if state.is_file():
        write_atomically(ls_target / PARTIAL_PARSE_FILE, state.read_bytes())
    ids, tail = _list_selection(project, ls_target)
    if ids is None:
        raise ProjectError(f"{project.file}: field 'serve.select': dbt cannot evaluate the "
                           f"selection {project.spec.serve.select!r}: {tail}")
    return set(ids) & models


def served_selection(project: Project, manifest_file: Path | None = None) -> ServedSelection:
    """Resolve ``serve.select``/``exclude`` against the project's manifest (``manifest_file``;
    default: parsed when stale), cached per manifest and selection, so loading the Dagster
    definitions does not re-run dbt."""
    manifest_file = manifest_file or parse(project)
    manifest = json.loads(manifest_file.read_text())
    key = hashlib.sha256(json.dumps([manifest_file.stat().st_mtime_ns, manifest_file.stat().st_size,
                                     project.spec.serve.select, project.spec.serve.exclude,
                                     project.spec.sensitive_schemas]).encode()).hexdigest()[:16]
    cache = project.dbt_target_dir / f"sqleval-served-{key}.json"
    if cache.exists():
        return ServedSelection.from_json(json.loads(cache.read_text()))
    ids = _selected_ids(project, manifest_file, manifest)
    nodes = manifest["nodes"]
    sensitive = set(project.spec.sensitive_schemas)
    served, unserved, skipped = [], [], []
    for uid in sorted(n for n, v in nodes.items() if v.get("resource_type") == "model"):
        rel = _relation(uid, nodes[uid])
        if uid not in ids:
            unserved.append(rel)
        elif rel.materialized == "ephemeral":
            skipped.append(f"{uid}: ephemeral models have no relation to serve")
            unserved.append(rel)
        elif rel.schema.lower() in sensitive:
            skipped.append(f"{uid}: in sensitive schema '{rel.schema}', never served")
            unserved.append(rel)
        else:
            served.append(rel)
    names: dict[str, str] = {}
    for r in served:
        if r.name.lower() in names:
            raise ProjectError(
                f"{project.file}: field 'serve.select': two served models are both named "
                f"'{r.name}' ({names[r.name.lower()]} and {r.unique_id}); the snapshot serves "
                "tables by name — exclude one of them")
        names[r.name.lower()] = r.unique_id
    if not served:
        raise ProjectError(
            f"{project.file}: field 'serve.select': the selection {project.spec.serve.select!r} "
            f"serves no model of the dbt project at {project.dbt_project_dir} "
            f"({len(unserved)} model(s) exist); check it with `dbt ls --select …`")
    selection = ServedSelection(served, unserved, skipped)
    cache.write_text(json.dumps(selection.to_json()))
    return selection


def sensitive_relations(selection: ServedSelection) -> list[tuple[str, str]]:
    """(schema, name) of every model that is not served: all of them must stay unreadable."""
    return sorted({(r.schema, r.name) for r in selection.unserved})
