"""Where finished results are shared: a remote copy of the store on any fsspec file system.

The pipeline works on a local store (``<build>/store``: fast local disk for DuckDB, file
locks, the attempt journal). With ``storage.remote`` in the project file (an fsspec URL:
``s3://bucket/sqleval``, ``gs://…``, ``az://…``, a shared ``/mnt/results`` folder, or
``memory://`` in tests), every stage publishes the files it finished to the remote, and a
process that lists a configuration's batches sees the remote ones too, fetching a batch it
does not have. So the workers of a shared Dagster deployment (each with its own scratch
disk) see one history, and a report or a gate on any machine reads the same batches: moving
from one machine to many is configuration, not code.

Rules that keep the remote consistent without locks: record files (Parquet) are immutable
once written (a re-grade writes a new name), so one already on the remote with the same
size is not sent again; the small JSON files a stage rebuilds (scorecard, comparisons) are
sent each time; a batch's ``batch.json`` is uploaded *after* its other files (a reader
never sees a batch whose files are missing). The crash journal (``parts/``), lock files
and temporary files are never published. A remote file system other than the local one and
``memory://`` needs its fsspec package installed (``s3fs``, ``gcsfs``, ``adlfs``).

>>> import tempfile, pathlib
>>> local = pathlib.Path(tempfile.mkdtemp())
>>> (local / "runs/cfg@1/b1").mkdir(parents=True)
>>> _ = (local / "runs/cfg@1/b1/grades.parquet").write_bytes(b"PAR1")
>>> _ = (local / "runs/cfg@1/b1/batch.json").write_text("{}")
>>> r = Remote("memory://doctest-bucket/sqleval")
>>> r.push(local, "runs/cfg@1/b1")
2
>>> r.batch_ids("cfg@1"), r.partitions()
(['b1'], ['cfg@1'])
"""

from __future__ import annotations

from pathlib import Path

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.textfiles import atomic_path
from sqleval_pipeline.errors import SqlevalError

#: never published: the crash journal, lock files, temporary files
_PRIVATE_PARTS = ("parts",)


def _private(rel: Path) -> bool:
    return any(p in _PRIVATE_PARTS for p in rel.parts) or rel.name.startswith(".") or \
        rel.name.endswith(".tmp")


class RemoteError(SqlevalError, RuntimeError):
    """The remote store cannot be reached or written; the message names it and what to do."""


class Remote:
    """A copy of the store's ``runs/`` tree at an fsspec URL."""

    def __init__(self, url: str):
        # fsspec (~0.1 s to import): only for a project with a remote store (storage.remote)
        import fsspec

        try:
            self.fs, self.root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise RemoteError(f"storage.remote {url!r} cannot be opened: {exc} (an s3://, gs:// or "
                              "az:// URL needs its fsspec package: s3fs, gcsfs or adlfs)") from exc
        self.url = url
        self.root = self.root.rstrip("/")

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}".rstrip("/")

    def push(self, local_root: Path, rel_dir: str) -> int:
        """Upload the finished files of ``local_root/rel_dir`` not yet on the remote (same
        size), ``batch.json`` last. Returns how many files were uploaded."""
        folder = local_root / rel_dir
        if not folder.is_dir():
            return 0
        files = sorted((p for p in folder.rglob("*") if p.is_file()
                        and not _private(p.relative_to(local_root))),
                       key=lambda p: (p.name == bf.BATCH, str(p)))
        sent = 0
        try:
            for p in files:
                target = self._path(p.relative_to(local_root).as_posix())
                size = p.stat().st_size
                if p.suffix == ".parquet" and self.fs.exists(target) and \
                        self.fs.size(target) == size:
                    continue  # an immutable record file already there
                self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                self.fs.put_file(str(p), target)
                sent += 1
        except OSError as exc:
            raise RemoteError(f"cannot publish {rel_dir} to {self.url}: {exc}") from exc
        return sent

    def pull(self, local_root: Path, rel_dir: str) -> int:
        """Download a remote batch folder that is missing locally (``batch.json`` last, so a
        half-fetched batch is not listed). Returns how many files were fetched."""
        base = self._path(rel_dir)
        try:
            if not self.fs.exists(f"{base}/batch.json"):
                return 0
            remote_files = [f for f in self.fs.find(base) if not f.endswith("/")]
        except OSError as exc:
            raise RemoteError(f"cannot read {rel_dir} from {self.url}: {exc}") from exc
        remote_files.sort(key=lambda f: (f.endswith("/batch.json"), f))
        got = 0
        for f in remote_files:
            rel = Path(f[len(self.root) + 1:])
            if _private(rel):
                continue
            dest = local_root / rel
            if dest.exists():
                continue
            with atomic_path(dest) as tmp:
                self.fs.get_file(f, str(tmp))
            got += 1
        return got

    def partitions(self) -> list[str]:
        return self._children("runs")

    def batch_ids(self, partition_key: str) -> list[str]:
        return self._children(f"runs/{partition_key}")

    def _children(self, rel: str) -> list[str]:
        base = self._path(rel)
        try:
            if not self.fs.exists(base):
                return []
            entries = self.fs.ls(base, detail=True)
        except OSError as exc:
            raise RemoteError(f"cannot list {rel} on {self.url}: {exc}") from exc
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries
                      if e.get("type") == "directory")
