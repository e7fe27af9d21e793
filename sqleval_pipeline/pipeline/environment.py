"""The pinned inputs every evaluation stage shares, for one project: the environment.

:func:`environment` resolves a project's pinned snapshot (its serving file and manifest), its
golden set (refusing cases frozen against another snapshot), its store, configurations and
decisions file; :func:`select_cases` and :func:`find_config` pick what one evaluation runs.
The stages themselves are in :mod:`sqleval_pipeline.pipeline.evaluation`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqleval_pipeline import paths
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.configs import ConfigError, LoadedConfig, load_configs
from sqleval_pipeline.golden.loader import load_golden
from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.project import Project
from sqleval_pipeline.project import current as current_project
from sqleval_pipeline.pipeline.store import Store
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.guard.policy import project_policy
from sqleval_pipeline.pipeline.storage import Remote

#: a progress callback: (stage, done, total)
Progress = Callable[[str, int, int], None]


class EvaluationError(SqlevalError, RuntimeError):
    """The evaluation cannot proceed; the message says what to do."""


@dataclass(frozen=True)
class Environment:
    """The pinned inputs every evaluation stage shares, for one project."""

    snapshot_id: str
    serving: Path
    as_of: dt.date
    cases: list[Case]
    store: Store
    configs_dir: Path
    decisions: Path
    project: Project
    manifest: snap.SnapshotManifest
    #: the dbt target folder of the build the snapshot came from (default: the project's)
    dbt_target: Path | None = None

    @property
    def dbt_target_dir(self) -> Path:
        """Where the last ``dbt build``'s manifest and run results are (its data tests)."""
        return self.dbt_target or self.project.dbt_target_dir

    def policy(self, overrides: dict | None = None):
        """The project's guard policy over this snapshot, with a configuration's overrides."""
        return project_policy(self.project, self.manifest, overrides)

    @property
    def labels_dir(self) -> Path:
        return self.project.labels_dir


def environment(project: Project | None = None, *, home: paths.Home | None = None,
                manifest_dir: Path | None = None, golden_dir: Path | None = None,
                configs_dir: Path | None = None, decisions: Path | None = None,
                dbt_target: Path | None = None) -> Environment:
    """The evaluation environment of a project (default: the current one); the keyword
    arguments override where its files are (tests use temporary folders)."""
    project = project or current_project()
    home = home or project.home
    manifest_dir = manifest_dir or project.manifest_dir
    try:
        pinned, manifest, serving = snap.pinned_snapshot(manifest_dir, home.snapshot_dir)
    except snap.SnapshotError as exc:
        raise EvaluationError(str(exc)) from exc
    if not serving.exists():
        raise EvaluationError(f"serving snapshot {serving} is missing; run `sqleval build`")
    _verify_serving(serving, manifest)
    golden = load_golden(golden_dir or project.golden_dir, **project.taxonomy)
    stale = sorted(c.id for c in golden.cases if c.answerable and c.snapshot_id not in (None, pinned))
    if stale:
        raise EvaluationError(f"golden cases frozen against another snapshot than {pinned}: "
                              f"{', '.join(stale[:10])}; re-freeze after review")
    return Environment(pinned, serving, manifest.as_of, golden.cases, project_store(project, home),
                       configs_dir or project.configs_dir, decisions or project.decisions_path,
                       project, manifest, dbt_target or home.root / "dbt_target")


#: serving files verified in this process: (path, size, mtime, inode) -> snapshot id
_VERIFIED: dict[tuple[str, int, int, int], str] = {}


def _verify_serving(serving: Path, manifest: snap.SnapshotManifest) -> None:
    """The serving file is the pinned snapshot, checked before any stage reads it
    (:func:`~sqleval_pipeline.snapshot.ensure_verified`); once per process while the file's
    size, modification time and inode stay the same."""
    st = serving.stat()
    key = (str(serving), st.st_size, st.st_mtime_ns, st.st_ino)
    if _VERIFIED.get(key) == manifest.snapshot_id:
        return
    try:
        snap.ensure_verified(serving, manifest)
    except snap.SnapshotError as exc:
        raise EvaluationError(str(exc)) from exc
    _VERIFIED[key] = manifest.snapshot_id


def project_store(project: Project, home: paths.Home | None = None) -> Store:
    """The project's store, with its shared remote copy when ``storage.remote`` names one."""
    url = project.spec.storage.url()
    if url and "://" not in url:  # a folder (a shared mount): relative to the project file
        url = str(project.path(url))
    return Store((home or project.home).store, Remote(url) if url else None)


def select_cases(cases: Sequence[Case], *, case_ids: Sequence[str] | None = None,
                 split: str | None = None) -> list[Case]:
    out = list(cases)
    if case_ids:
        known = {c.id for c in cases}
        unknown = [i for i in case_ids if i not in known]
        if unknown:
            raise EvaluationError(f"unknown case id(s): {', '.join(unknown)}")
        wanted = set(case_ids)
        out = [c for c in out if c.id in wanted]
    if split:
        if split not in ("dev", "heldout"):
            raise EvaluationError(f"split must be 'dev' or 'heldout', not {split!r}")
        out = [c for c in out if c.split == split]
    if not out:
        raise EvaluationError("no cases selected")
    return out


def find_config(env: Environment, partition_key: str, *, strict: bool = False) -> LoadedConfig:
    """The configuration whose *current* version is ``partition_key`` (``name@hash8``; a bare
    name means its current version unless ``strict``, as for a Dagster partition key). A
    malformed or unknown key is refused with the current keys listed. An unrelated
    configuration that fails to load does not stop this one."""
    name, _, version = partition_key.partition("@")
    errors: list[str] = []
    configs = {c.name: c for c in load_configs(env.configs_dir, project=env.project, errors=errors)}
    valid = ", ".join(sorted(c.partition_key for c in configs.values())) or "none"
    hint = ("; these configuration files could not be loaded:\n  " + "\n  ".join(errors)) if errors else ""
    if (strict or "@" in partition_key) and not re.fullmatch(r"[0-9a-f]{8}", version):
        raise EvaluationError(f"partition key {partition_key!r} is not <configuration name>@<8-hex version>; "
                              f"the current keys are: {valid}{hint}")
    if name not in configs:
        raise EvaluationError(f"no configuration named {name!r} in {env.configs_dir} (partition key "
                              f"{partition_key!r}); the current keys are: {valid}{hint}")
    loaded = configs[name]
    if version and loaded.version != version:
        raise ConfigError(
            f"configuration {name!r} has changed: its version is now {loaded.version}, not "
            f"{version}. Evaluate {loaded.partition_key} instead (the sensor registers it)."
        )
    return loaded


__all__ = ["Environment", "EvaluationError", "Progress", "environment", "find_config", "select_cases"]
