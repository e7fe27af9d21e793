"""Several configurations at once, and several machines: results do not depend on who ran
what when."""

import dataclasses

import pytest

from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.demo import location
from sqleval_pipeline.configs import load_config
from sqleval_pipeline.pipeline.records import Grade, load_records
from sqleval_pipeline.pipeline.storage import Remote
from sqleval_pipeline.pipeline.store import Store
from tests.conftest import at_once

IDS = ["com-001", "com-004", "com-012", "com-018", "com-025"]


def configs(tmp_path):
    """Three configuration versions: copies of the two bundled baselines under names of their
    own, and a third with four runs. Own names, because a scorecard's judge-calibration line
    reads the human labels of the bundled configurations' newest batches in the store: with
    those names, a version's scorecard would depend on which other batches had finished when
    it was built (the order of the runs), which is not what these tests compare."""
    out = []
    for src, name, extra in (("baseline_raw.yaml", "raw-copy", ""),
                             ("baseline_curated.yaml", "curated-copy", ""),
                             ("baseline_raw.yaml", "raw-four-runs", "runs: 4")):
        text = (location.EVALS_DIR / "configs" / src).read_text()
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith(("name:", "baseline:") + (("runs:",) if extra else ())))
        f = tmp_path / f"{name}.yaml"
        f.write_text(f"name: {name}\n{extra}\n{text}\n")
        out.append(load_config(f))
    return out


def stored(store: Store, key: str):
    """What a version's newest batch says: its grades and its scorecard, without batch ids —
    and without the latencies the scorecard reports (``usage``: wall times measured while the
    runs ran, which do depend on who ran what when; everything else must not)."""
    import json

    b = store.latest(key, complete_only=True)
    grades = [g.model_dump_json() for g in load_records(
        store.artifact(key, b.batch_id, "grades.parquet"), Grade)]
    card = json.loads(store.artifact(key, b.batch_id, "scorecard.json").read_text())
    usage = card.pop("usage")
    assert usage is not None and usage["latency"]["n"] == len(grades)  # measured, for every attempt
    return grades, card


def test_versions_evaluated_at_once_store_what_they_store_one_after_another(env, tmp_path):
    loaded = configs(tmp_path)
    together = dataclasses.replace(env, store=Store(tmp_path / "together"))
    apart = dataclasses.replace(env, store=Store(tmp_path / "apart"))
    _, errors = at_once(*(lambda c=c: cmp.evaluate(together, c, case_ids=IDS) for c in loaded))
    assert errors == []
    for cfg in loaded:
        cmp.evaluate(apart, cfg, case_ids=IDS)
    for cfg in loaded:
        assert stored(together.store, cfg.partition_key) == stored(apart.store, cfg.partition_key)
        assert len(together.store.batches(cfg.partition_key)) == 1


def test_a_second_machine_sees_and_reuses_the_first_ones_batch_through_the_remote(env, tmp_path):
    raw = configs(tmp_path)[0]
    remote_dir = tmp_path / "shared"
    a = dataclasses.replace(env, store=Store(tmp_path / "a", Remote(str(remote_dir))))
    first = cmp.evaluate(a, raw, case_ids=IDS)
    published = remote_dir / "runs" / raw.partition_key / first.batch.batch_id
    names = {p.name for p in published.iterdir()}
    assert {"batch.json", "attempts.parquet", "executions.parquet", "grades.parquet",
            "scorecard.json"} <= names
    assert not {n for n in names if n.startswith(".") or n == "parts"}  # no journal, no locks

    b = dataclasses.replace(env, store=Store(tmp_path / "b", Remote(str(remote_dir))))
    assert [x.batch_id for x in b.store.batches(raw.partition_key)] == [first.batch.batch_id]
    again = cmp.evaluate(b, raw, case_ids=IDS)  # "latest": the shared batch, no new answers
    assert again.batch.batch_id == first.batch.batch_id and again.provider_calls == 0
    assert stored(b.store, raw.partition_key) == stored(a.store, raw.partition_key)


def test_an_unreachable_remote_is_named(tmp_path):
    from sqleval_pipeline.pipeline.storage import RemoteError

    with pytest.raises(RemoteError, match="nosuchproto://x"):
        Remote("nosuchproto://x")


def test_two_runs_of_one_version_at_once_make_one_batch(env, tmp_path):
    """Two "latest" runs of the same version at once: the batch is chosen and recorded under
    the partition's lock, so both continue the same batch (filled once), never two."""
    raw = configs(tmp_path)[0]
    env = dataclasses.replace(env, store=Store(tmp_path / "one"))
    results, errors = at_once(*[lambda: ev.stage_attempts(env, raw, case_ids=IDS)] * 2)
    assert errors == []
    assert len(env.store.batches(raw.partition_key)) == 1
    assert results[0].batch.batch_id == results[1].batch.batch_id
    # one of them filled it, the other found it complete (the baseline calls no provider:
    # neither counts a provider call)
    assert sorted(r.resumed for r in results) == [0, len(IDS) * 3]
    assert [r.provider_calls for r in results] == [0, 0]


def test_the_project_file_names_the_remote_folder_or_url(tmp_path, monkeypatch):
    from sqleval_pipeline.pipeline.environment import project_store
    from sqleval_pipeline.project import load_project

    (tmp_path / "sqleval.yaml").write_text(
        "version: 1\nname: shop\nas_of: 2025-06-30\nstorage:\n  remote: shared/results\n"
        "  remote_env: SHOP_RESULTS\n")
    monkeypatch.delenv("SHOP_RESULTS", raising=False)
    store = project_store(load_project(tmp_path))
    assert store.remote.root == str((tmp_path / "shared" / "results").resolve())
    monkeypatch.setenv("SHOP_RESULTS", "memory://team-bucket/sqleval")
    store = project_store(load_project(tmp_path))
    assert store.remote.url == "memory://team-bucket/sqleval"
    (tmp_path / "sqleval.yaml").write_text("version: 1\nname: shop\nas_of: 2025-06-30\n")
    assert project_store(load_project(tmp_path)).remote is None


def test_readers_of_the_serving_file_in_one_process_can_open_it_at_once(serving_snapshot):
    """Evaluations side by side in one process open the serving file from several threads
    (catalog, guard set-up, fingerprints): DuckDB refuses a second connection with other
    settings, so every reader opens it with the same ones."""
    from sqleval_pipeline import snapshot as snap

    def times(n, fn):
        return lambda: [fn() for _ in range(n)]

    path = serving_snapshot.path
    _, errors = at_once(times(100, lambda: snap.list_serving_objects(path)),
                        times(100, lambda: snap.open_readonly(path).close()),
                        times(1, lambda: snap.fingerprint_serving(path)))  # hashes every table
    assert errors == []
