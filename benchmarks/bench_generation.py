"""Attempt-runner throughput against a fake provider with a fixed latency.

60 cases x 3 runs = 180 calls through the real OpenAI-compatible client to a loopback fake
answering after LATENCY seconds, at concurrency 1, 8 and 32; compared with the ideal
(calls x latency / concurrency). Then the finished batch is re-run: it must make zero
provider calls. Needs a built snapshot (`make demo` or `sqleval build`).

    .venv/bin/python benchmarks/bench_generation.py [--latency 0.2] [--skip-serial]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqleval_pipeline.pipeline import evaluation as ev  # noqa: E402
from sqleval_pipeline.configs import ContextSettings, OpenAISettings  # noqa: E402
from sqleval_pipeline.generation.context import ContextBuilder, load_catalog  # noqa: E402
from sqleval_pipeline.generation.openai_gen import OpenAIGenerator  # noqa: E402
from sqleval_pipeline.generation.runner import open_batch, run_attempts  # noqa: E402
from sqleval_pipeline.pipeline.store import Store  # noqa: E402
from tests.generation.fakes import FakeOpenAI, sql  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--skip-serial", action="store_true", help="skip concurrency 1 (36 s)")
    args = ap.parse_args()
    env = ev.environment()
    cases = [c for c in env.cases][:60]
    runs = 3
    catalog = load_catalog(env.serving, env.as_of)
    builder = ContextBuilder(catalog, ContextSettings(), None, env.cases,
                             Path(__file__).resolve().parent.parent / "evals/prompts/text_to_sql_v1.j2")
    calls = len(cases) * runs
    print(f"{len(cases)} cases x {runs} runs = {calls} calls, fake latency {args.latency * 1000:.0f} ms")
    print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'waves s':>8} "
          f"{'ratio':>6} {'calls':>6}")
    print("  (ideal = calls x latency / concurrency; waves = ceil(calls / concurrency) x latency,"
          " the bound when calls come in whole waves)")
    levels = [8, 32] if args.skip_serial else [1, 8, 32]
    with FakeOpenAI(default=sql("SELECT 1"), latency=args.latency) as fake, \
            tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp))
        settings = OpenAISettings(model="bench-model", base_url=fake.base_url + "/v1", api_key_env=None)
        for conc in levels:
            gen = OpenAIGenerator(settings, timeout_s=30)
            info = open_batch(store, partition_key=f"bench@c{conc}", config_name="bench",
                              config_version=f"c{conc}", snapshot_id=env.snapshot_id, cases=cases,
                              runs=runs, mode="new")
            before = len(fake.requests)
            t = time.perf_counter()
            res = run_attempts(store=store, info=info, cases=cases, generator=gen, builder=builder,
                               concurrency=conc, max_retries=0)
            wall = time.perf_counter() - t
            ideal = calls * args.latency / conc
            assert len(fake.requests) - before == calls and res.provider_calls == calls
            waves = -(-calls // conc) * args.latency
            print(f"{conc:>11} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f} {waves:>8.2f} "
                  f"{wall / waves:>6.2f} {res.provider_calls:>6}")
            gen.close()
        # re-run the finished batch: no provider calls
        before = len(fake.requests)
        info = open_batch(store, partition_key=f"bench@c{levels[-1]}", config_name="bench",
                          config_version=f"c{levels[-1]}", snapshot_id=env.snapshot_id, cases=cases,
                          runs=runs, mode="latest")
        t = time.perf_counter()
        res = run_attempts(store=store, info=info, cases=cases, generator=None, builder=builder,
                           concurrency=32, max_retries=0)
        print(f"re-run of a finished batch: {res.provider_calls} provider calls "
              f"({len(fake.requests) - before} requests seen by the fake), "
              f"{time.perf_counter() - t:.3f} s, {len(res.attempts)} attempts reused")


if __name__ == "__main__":
    main()
