"""Scale: per-stage seconds, attempts per second and peak memory as the golden set grows.

The project's golden set is replicated to N copies of every case (ids suffixed ``.xNNNN``,
same questions, references and frozen results) and one offline configuration is evaluated
end to end on it (``evaluation.evaluate``: attempts, executions, grades, diagnoses,
scorecard, gate), each scale in a fresh process with a fresh store so peak RSS is that
scale's own. Needs a built snapshot (`make demo` or `sqleval build`).

    .venv/bin/python benchmarks/bench_scale.py                      # x1 x10 x50 x150
    .venv/bin/python benchmarks/bench_scale.py --scales 1 10 --config baseline-raw
    .venv/bin/python benchmarks/bench_scale.py --concurrent 5 --scale 10   # five versions at once
    .venv/bin/python benchmarks/bench_scale.py --provider --scale 150 --latency 0.2

Targets (issue 14): >= 500 attempts/s end to end at the largest scale; per-stage cost per
attempt at the largest scale within 1.5x of the smallest; peak RSS under 600 MB at 30,600
attempts; the provider-bound run (loopback fake, fixed latency, concurrency 32) within 1.15x
of the ideal calls x latency / concurrency.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ("attempts", "executions", "grades", "diagnoses", "scorecard")


def replicated_env(scale: int, store_root: Path):
    from sqleval_pipeline.pipeline import comparisons as cmp
    from sqleval_pipeline.pipeline import evaluation as ev
    from sqleval_pipeline.pipeline.store import Store

    env = ev.environment()
    cases = [c.model_copy(update={"id": f"{c.id}.x{i:04d}"}) if scale > 1 else c
             for i in range(scale) for c in env.cases]
    return dataclasses.replace(env, cases=cases, store=Store(store_root))


def make_every_sql_distinct() -> None:
    """Worst case for the guard: every attempt's SQL text differs (a comment naming the case
    and run), so nothing is executed once for several attempts."""
    from sqleval_pipeline.generation.baseline import BaselineGenerator

    plain = BaselineGenerator.generate

    def generate(self, ctx):
        out = plain(self, ctx)
        if out.kind == "sql":
            out.sql = f"{out.sql}\n-- {ctx.case_id} run {ctx.run_index}"
        return out

    BaselineGenerator.generate = generate


def one(scale: int, config: str, store_root: Path, runs: int, distinct: bool = False) -> dict:
    """Evaluate ``config`` on the golden set replicated ``scale`` times (in this process)."""
    from sqleval_pipeline.pipeline import comparisons as cmp
    from sqleval_pipeline.pipeline import evaluation as ev
    from sqleval_pipeline.configs import load_configs

    if distinct:
        make_every_sql_distinct()
    env = replicated_env(scale, store_root)
    loaded = {c.name: c for c in load_configs(env.configs_dir, project=env.project)}[config]
    t = time.perf_counter()
    res = cmp.evaluate(env, loaded, runs=runs)
    wall = time.perf_counter() - t
    attempts = len(env.cases) * runs
    return {"scale": scale, "cases": len(env.cases), "attempts": attempts, "wall": wall,
            "stages": res.seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "accuracy": res.scorecard.overall.accuracy.value,
            "fingerprint": fingerprint(env.store, res.batch)}


def fingerprint(store, batch) -> str:
    """A hash of what the batch's grades and scorecard say (no timestamps, no batch ids):
    equal fingerprints mean equal stored results."""
    import hashlib

    from sqleval_pipeline.pipeline.records import Grade, load_records

    h = hashlib.sha256()
    for g in sorted(load_records(store.artifact(batch.partition_key, batch.batch_id,
                                                "grades.parquet"), Grade), key=lambda g: g.key):
        h.update(g.model_dump_json().encode())
    h.update(store.artifact(batch.partition_key, batch.batch_id, "scorecard.json").read_bytes())
    return h.hexdigest()[:16]


def run_child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"child {' '.join(args)} failed ({out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> None:
    head = f"{'cases':>7} {'attempts':>8} {'wall s':>7} {'att/s':>6} " + " ".join(
        f"{s:>10}" for s in STAGES) + f" {'peak RSS':>9}"
    print(head)
    for r in rows:
        print(f"{r['cases']:>7} {r['attempts']:>8} {r['wall']:>7.1f} {r['attempts'] / r['wall']:>6.0f} "
              + " ".join(f"{r['stages'].get(s, 0):>10.2f}" for s in STAGES)
              + f" {r['peak_rss_mb']:>6.0f} MB  {r['fingerprint']}")
    if len(rows) > 1:
        small, big = rows[0], rows[-1]
        print("\nper-attempt cost, largest / smallest scale (target <= 1.5):")
        for s in STAGES:
            a = small["stages"].get(s, 0) / small["attempts"]
            b = big["stages"].get(s, 0) / big["attempts"]
            print(f"  {s:<11} {a * 1e3:8.3f} ms -> {b * 1e3:8.3f} ms  ({b / a if a else float('nan'):.2f}x)")


# ---- provider-bound: a loopback OpenAI-compatible fake with a fixed latency -----------------


def serve_fake(latency: float) -> None:
    """Serve the OpenAI-compatible fake (in its own process, as a real provider is) until
    stdin closes; print its base URL first."""
    from tests.generation.fakes import FakeOpenAI, sql

    fake = FakeOpenAI(default=sql("SELECT count(*) AS n FROM fct_orders"), latency=latency)
    fake.requests = _Discard()  # 30k request bodies are not kept
    with fake:
        print(fake.base_url, flush=True)
        sys.stdin.read()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{ru.ru_utime + ru.ru_stime:.1f}", flush=True)


class _Discard(list):
    def append(self, _item) -> None:
        pass


def provider_one(scale: int, store_root: Path, runs: int, base_url: str, concurrency: int,
                 latency: float) -> dict:
    """The attempts stage (then the rest) of an OpenAI-compatible configuration whose calls
    take ``latency`` seconds, with ``concurrency`` calls in flight."""
    import yaml

    from sqleval_pipeline.pipeline import comparisons as cmp
    from sqleval_pipeline.pipeline import evaluation as ev
    from sqleval_pipeline.configs import load_configs

    env = replicated_env(scale, store_root)
    folder = store_root / "configs"
    folder.mkdir(parents=True)
    (folder / "llm.yaml").write_text(yaml.safe_dump({
        "name": "bench-llm", "generator": {"kind": "openai", "model": "bench-model",
                                           "base_url": base_url + "/v1", "api_key_env": None},
        "context": {"prompt_template": "evals/prompts/text_to_sql_v1.j2", "retrieval_k": 6,
                    "curation": True, "few_shot_examples": 3},
        "runs": runs, "concurrency": concurrency, "max_retries": 0, "judge": "rules"}))
    (loaded,) = load_configs(folder, project=env.project)
    marks: dict[str, float] = {}

    def progress(_stage, done, total):
        now = time.perf_counter()
        marks.setdefault("first", now)  # the call (0 done) before the first answer
        if done == total:
            marks["last"] = now

    t = time.perf_counter()
    run = ev.stage_attempts(env, loaded, progress=progress)
    attempts_s = time.perf_counter() - t
    calls_s = marks["last"] - marks["first"]
    calls = len(env.cases) * runs
    assert run.provider_calls == calls, (run.provider_calls, calls)
    ideal = calls * latency / concurrency
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"scale": scale, "attempts": calls, "attempts_s": attempts_s, "ideal_s": ideal,
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "ratio": attempts_s / ideal if ideal else float("inf"), "calls_s": calls_s,
            "setup_s": attempts_s - calls_s, "errors": run.batch.counts.get("error", 0),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def provider(scale: int, runs: int, latency: float, concurrency: int) -> None:
    fake = subprocess.Popen([sys.executable, __file__, "--serve-fake", str(latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        base_url = fake.stdout.readline().strip()
        with tempfile.TemporaryDirectory(prefix="sqleval-bench-") as tmp:
            r = run_child(["--provider-one", str(scale), "--store", tmp, "--runs", str(runs),
                           "--base-url", base_url, "--latency", str(latency),
                           "--concurrency", str(concurrency)])
    finally:
        fake.stdin.close()
        fake_cpu = fake.stdout.readline().strip()
        fake.wait(timeout=10)
    print(f"provider-bound: {r['attempts']} calls, {latency * 1000:.0f} ms each, "
          f"concurrency {concurrency}")
    print(f"  attempts stage {r['attempts_s']:.1f} s, ideal {r['ideal_s']:.1f} s "
          f"(calls x latency / concurrency): {r['ratio']:.3f}x (target <= 1.15); "
          f"errors {r['errors']}; peak RSS {r['peak_rss_mb']:.0f} MB")
    print(f"  of which calls {r['calls_s']:.1f} s ({r['calls_s'] / r['ideal_s']:.3f}x ideal), "
          f"setup and consolidation {r['setup_s']:.1f} s")
    print(f"  CPU: sqleval {r['cpu_s']:.1f} s ({r['cpu_s'] / r['attempts'] * 1000:.2f} ms per call), "
          f"the fake provider {fake_cpu} s (on the same 2 cores)")


# ---- several configurations at once, through the CLI (Dagster, one instance, one store) ----


def scratch_project(root: Path, scale: int, n_configs: int) -> Path:
    """A project beside the demo: the demo's dbt project, snapshot and policy, a golden set
    replicated ``scale`` times and ``n_configs`` versions of the curated baseline (they differ
    in ``context.retrieval_k``, which the baseline does not read: same answers, other
    versions), building into ``root/home``."""
    import shutil

    import yaml

    from sqleval_pipeline.project import current

    demo = current()
    spec = yaml.safe_load(demo.file.read_text())
    (root / "golden").mkdir(parents=True)
    (root / "configs").mkdir()
    env_cases = replicated_env(scale, root / "unused").cases
    (root / "golden" / "commerce.jsonl").write_text(
        "".join(c.to_json_line() + "\n" for c in env_cases))
    base = yaml.safe_load((demo.configs_dir / "baseline_curated.yaml").read_text())
    for i in range(n_configs):
        cfg = {**base, "name": f"bench-{i}", "context": {**base["context"], "retrieval_k": i + 1}}
        cfg.pop("baseline", None)
        (root / "configs" / f"bench_{i}.yaml").write_text(yaml.safe_dump(cfg))
    here = demo.root
    spec["dbt"]["project_dir"] = str(here / spec["dbt"]["project_dir"])
    spec["validation"] = str(here / spec["validation"])
    p = spec["paths"]
    for k in ("guard_policy", "glossary", "labels", "snapshots"):
        p[k] = str(here / p[k])
    p.update(golden=str(root / "golden"), configs=str(root / "configs"),
             decisions=str(root / "decisions.yaml"), build=str(root / "home"))
    (root / "sqleval.yaml").write_text(yaml.safe_dump(spec))
    shutil.copytree(demo.home.snapshot_dir, root / "home" / "snapshots")
    return root


def concurrent(n: int, scale: int) -> None:
    """``n`` configuration versions evaluated by ``n`` CLI processes at once in one project
    (one Dagster instance, one store), then one after another in a second project: wall time
    and per-version fingerprints of the stored grades and scorecards (must be equal)."""
    exe = Path(sys.executable).parent / "sqleval"
    results = {}
    with tempfile.TemporaryDirectory(prefix="sqleval-conc-") as tmp:
        for mode in ("concurrent", "sequential"):
            proj = scratch_project(Path(tmp) / mode, scale, n)
            env = {**os.environ, "SQLEVAL_PROJECT": str(proj)}
            env.pop("SQLEVAL_HOME", None)
            cmds = [[str(exe), "run", "-c", str(proj / "configs" / f"bench_{i}.yaml")] for i in range(n)]
            t = time.perf_counter()
            if mode == "concurrent":
                procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True) for c in cmds]
                outs = [(p.wait(), p.stdout.read()) for p in procs]
            else:
                outs = []
                for c in cmds:
                    r = subprocess.run(c, env=env, capture_output=True, text=True)
                    outs.append((r.returncode, r.stdout + r.stderr))
            wall = time.perf_counter() - t
            failed = [o for rc, o in outs if rc != 0]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} run(s) failed:\n{failed[0][-3000:]}")
            results[mode] = (wall, fingerprints(proj))
    (cw, cf), (sw, sf) = results["concurrent"], results["sequential"]
    print(f"{n} configuration versions, golden set x{scale}, each through `sqleval run` "
          "(Dagster, one instance, one store)")
    print(f"  at once:         {cw:7.1f} s")
    print(f"  one after other: {sw:7.1f} s")
    same = all(cf[k][0] == sf[k][0] for k in sf) and cf.keys() == sf.keys()
    for k in sorted(sf):
        print(f"  {k:<14} {cf.get(k, ('-',))[0]}  {sf[k][0]}  attempts {sf[k][1]}")
    print(f"  stored results identical: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


def fingerprints(project_root: Path) -> dict[str, tuple[str, int]]:
    from sqleval_pipeline.pipeline.store import Store

    store = Store(project_root / "home" / "store")
    out = {}
    for key in store.partitions():
        b = store.latest(key, complete_only=True)
        out[key.split("@")[0]] = (fingerprint(store, b), len(b.case_ids) * b.runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 10, 50, 150])
    ap.add_argument("--config", default="baseline-curated")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--distinct-sql", action="store_true",
                    help="every attempt's SQL text differs (the guard's worst case)")
    ap.add_argument("--concurrent", type=int, metavar="N",
                    help="N configuration versions at once vs one after another (with --scale)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--provider", action="store_true",
                    help="provider-bound run against a loopback fake (with --scale, --latency)")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--provider-one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--serve-fake", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.config, Path(args.store), args.runs, args.distinct_sql)))
        return
    if args.serve_fake is not None:
        serve_fake(args.serve_fake)
        return
    if args.provider_one is not None:
        print(json.dumps(provider_one(args.provider_one, Path(args.store), args.runs, args.base_url,
                                      args.concurrency, args.latency)))
        return
    if args.provider:
        provider(args.scale, args.runs, args.latency, args.concurrency)
        return
    if args.concurrent:
        concurrent(args.concurrent, args.scale)
        return
    rows = []
    for scale in args.scales:
        with tempfile.TemporaryDirectory(prefix="sqleval-bench-") as tmp:
            rows.append(run_child(["--one", str(scale), "--store", tmp, "--config", args.config,
                                   "--runs", str(args.runs)]
                                  + (["--distinct-sql"] if args.distinct_sql else [])))
        r = rows[-1]
        print(f"x{scale}: {r['attempts']} attempts in {r['wall']:.1f} s", file=sys.stderr)
    table(rows)


if __name__ == "__main__":
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    main()
