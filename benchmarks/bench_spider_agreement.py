"""Agreement of sqleval's verdicts with Spider's official execution evaluator, on real predictions.

    .venv/bin/python benchmarks/bench_spider_agreement.py \\
        --spider-dir SPIDER --predictions predicted_sql.txt \\
        --evaluator-dir test-suite-sql-eval --python EVAL_VENV/bin/python \\
        [--dbs concert_singer,pets_1,...] --workdir /tmp/spider_agreement/run

SPIDER holds Spider's ``dev.json``, ``tables.json`` and ``database/<db_id>/<db_id>.sqlite``;
the predictions file has one SQLite query per line in ``dev.json`` order (a published system's
output). Nothing is downloaded. Steps, each timed:

1. **official**: taoyds/test-suite-sql-eval, run unchanged with ``--etype exec`` (no
   ``--plug_value``, no ``--keep_distinct``) by the evaluator's own Python: once on the whole
   file through its command line (the published number), and once per question (its
   ``evaluation.evaluate`` on a one-line gold/prediction pair) for the per-question verdicts;
   the per-question pass is repeated with ``--keep_distinct`` as a secondary comparison.
   Offline, nltk's punkt model is missing; ``word_tokenize`` is given ``preserve_line=True``
   (same Treebank tokenizer, no punkt sentence split). In exec mode the tokenizer only feeds
   the SQL parser, whose output decides the hardness, never the execution verdict.
2. **sqleval**, as a user would (tests/golden/test_sqlite_benchmark.py): the SQLite files become
   dbt seeds (``sqlite_to_dbt_seeds``; ``empty_strings='null'`` only for databases that hold
   empty strings, which the default refuses), one project per group of databases whose table
   names do not clash, ``sqleval build``, ``sqleval golden import dev.json --reviewer``, the
   predictions replayed as a ``recorded`` configuration (``dialect: sqlite``, 3 runs, rules
   judge), ``sqleval run``, ``sqleval export``.
3. **compare**: official exec match × sqleval accepted (CORRECT or CORRECT_FACTS, run 0; flips
   across runs are counted), every disagreement listed. Writes ``summary.json`` and
   ``summary.md`` in the workdir and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqleval_pipeline.warehouse.sqlite_seeds import (  # noqa: E402
    SeedConversionError, declared_constraints, sqlite_to_dbt_seeds, write_serving_models)

RIGHT = {"CORRECT", "CORRECT_FACTS"}
SQLEVAL = [sys.executable, "-c", "import sys; from sqleval_pipeline.cli import main; sys.exit(main())"]

# Runs inside the evaluator's venv: argv = evaluator_dir db_dir jobs.json out.json keep_distinct.
# Only the tokenizer is replaced (see the module docstring); evaluate() is the evaluator's own.
EVAL_DRIVER = r"""
import contextlib, functools, io, json, os, sys, tempfile, traceback
import nltk
nltk.word_tokenize = functools.partial(nltk.word_tokenize, preserve_line=True)
ev_dir, db_dir, jobs_path, out_path = sys.argv[1:5]
keep_distinct = sys.argv[5] == "1"
sys.path.insert(0, ev_dir); os.chdir(ev_dir)
import evaluation
levels = ["easy", "medium", "hard", "extra", "all"]
out = {}
tmp = tempfile.mkdtemp()
gold, pred = os.path.join(tmp, "gold.txt"), os.path.join(tmp, "pred.txt")
for job in json.load(open(jobs_path)):
    open(gold, "w").write(job["gold"] + "\t" + job["db"] + "\n")
    open(pred, "w").write(job["pred"] + "\n")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            evaluation.evaluate(gold, pred, db_dir, "exec", None, False, keep_distinct, False)
    except BaseException:
        out[job["idx"]] = {"error": traceback.format_exc(limit=2)[-500:]}
        continue
    rows = {l.split()[0]: l.split()[1:] for l in buf.getvalue().splitlines() if l.strip()}
    counts = [int(x) for x in rows["count"]]
    out[job["idx"]] = {"exec": float(rows["execution"][4]) == 1.0,
                       "hardness": levels[counts.index(1)]}
json.dump(out, open(out_path, "w"))
"""
# the evaluator's command line, unchanged, with the same tokenizer substitution
EVAL_CLI = ("import functools, runpy, sys, nltk; "
            "nltk.word_tokenize = functools.partial(nltk.word_tokenize, preserve_line=True); "
            "sys.argv = ['evaluation.py'] + sys.argv[1:]; sys.path.insert(0, '.'); "
            "runpy.run_path('evaluation.py', run_name='__main__')")


def timed(seconds: dict, step: str):
    class _T:
        def __enter__(self):
            self.t0 = time.monotonic()
        def __exit__(self, *exc):
            seconds[step] = round(seconds.get(step, 0) + time.monotonic() - self.t0, 1)
    return _T()


def sqleval(project: Path, log: Path, *args: str, timeout: float = 7200) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("SQLEVAL_HOME", "SQLEVAL_PROJECT")}
    env.update(NO_COLOR="1", TERM="dumb", COLUMNS="250")
    res = subprocess.run([*SQLEVAL, "--project", str(project), *args], cwd=project, env=env,
                         capture_output=True, text=True, timeout=timeout, check=False)
    text = f"$ sqleval {' '.join(args)}\n[exit {res.returncode}]\n{res.stdout}\n{res.stderr}\n"
    with log.open("a", encoding="utf-8") as f:
        f.write(text)
    return text


# --------------------------------------------------------------------------- official evaluator

def run_official(args, questions: list[dict], work: Path, seconds: dict) -> tuple[dict, dict]:
    db_dir = str(Path(args.spider_dir).resolve() / "database")
    jobs = [{"idx": q["idx"], "gold": q["query"], "db": q["db_id"], "pred": q["pred"]}
            for q in questions]
    (work / "official_jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
    # the whole file through the evaluator's command line (the number a paper reports)
    (work / "gold.txt").write_text("".join(f"{j['gold']}\t{j['db']}\n" for j in jobs))
    (work / "pred.txt").write_text("".join(f"{j['pred']}\n" for j in jobs))
    cmd = [args.python, "-c", EVAL_CLI, "--gold", str(work / "gold.txt"), "--pred",
           str(work / "pred.txt"), "--db", db_dir, "--table",
           str(Path(args.spider_dir).resolve() / "tables.json"), "--etype", "exec"]
    with timed(seconds, "official evaluator, whole file (CLI)"):
        res = subprocess.run(cmd, cwd=args.evaluator_dir, capture_output=True, text=True, check=False)
    (work / "official_cli.log").write_text(res.stdout + res.stderr, encoding="utf-8")
    line = next((l for l in res.stdout.splitlines() if l.startswith("execution")), None)
    cli = {"command": " ".join(cmd[:2] + ["<EVAL_CLI shim>"] + cmd[3:]),
           "execution_all": float(line.split()[5]) if line else None, "returncode": res.returncode}
    per_q = []  # the evaluator's default, then with --keep_distinct (a secondary comparison)
    for keep, out in (("0", "official.json"), ("1", "official_keep_distinct.json")):
        with timed(seconds, f"official evaluator, per question (keep_distinct={keep})"):
            subprocess.run([args.python, "-c", EVAL_DRIVER, str(Path(args.evaluator_dir).resolve()),
                            db_dir, str(work / "official_jobs.json"), str(work / out), keep],
                           check=True)
        per_q.append({int(k): v for k, v in json.loads((work / out).read_text()).items()})
    return per_q[0], per_q[1], cli


# --------------------------------------------------------------------------- sqleval projects

def table_names(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {r[0].lower() for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")}
    finally:
        con.close()


def group_databases(files: dict[str, Path]) -> list[list[str]]:
    """Greedy groups of databases without a table-name clash: one snapshot serves a name once."""
    names = {db: table_names(f) for db, f in files.items()}
    groups: list[list[str]] = []
    for db in sorted(names, key=lambda d: (-len(names[d]), d)):
        home = next((g for g in groups if not any(names[db] & names[o] for o in g)), None)
        if home is None:
            groups.append([db])
        else:
            home.append(db)
    return groups


def write_project(root: Path, name: str, files: list[Path]) -> tuple[Path, list[str]]:
    dbt = root / "dbt"
    dbt.mkdir(parents=True)
    (dbt / "dbt_project.yml").write_text(
        f"name: {name}\nversion: '1.0.0'\nconfig-version: 2\nprofile: {name}\n"
        "seed-paths: [seeds]\nmodel-paths: [models]\n", encoding="utf-8")
    (dbt / "profiles.yml").write_text(
        f"{name}:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        "      path: target/bench.duckdb\n      threads: 1\n", encoding="utf-8")
    # the default refuses empty strings (a seed reads them back as NULL); say which need it
    empty_null = []
    for f in files:
        try:
            sqlite_to_dbt_seeds([f], root / "probe" / f.stem)
        except SeedConversionError as exc:
            if "empty string" not in str(exc):
                raise
            empty_null.append(f"{f.stem}: {exc}")
    tables = sqlite_to_dbt_seeds(files, dbt, empty_strings="null" if empty_null else "error")
    write_serving_models(tables, dbt, constraints=declared_constraints(files))
    project = root / "project"
    evals = project / "evals"
    for sub in ("golden", "configs", "labels", "answers"):
        (evals / sub).mkdir(parents=True)
    (evals / "hostile.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [
        {"id": "bench-write", "category": "writes", "sql": "DELETE FROM {table}", "expect": ["filter"]},
        {"id": "bench-stacked", "category": "stacked", "sql": "SELECT 1; DROP TABLE {table}",
         "expect": ["filter"]}]), encoding="utf-8")
    (evals / "decisions.yaml").write_text("[]\n", encoding="utf-8")
    spec = {
        "version": 1, "name": name, "description": "Spider dev databases converted to seeds",
        "dbt": {"project_dir": str(dbt), "profiles_dir": str(dbt), "warehouse": "build"},
        "serve": {"select": "tag:serving", "schema": "main"}, "as_of": "2024-01-01",
        "validation": "none",
        "taxonomy": {"difficulties": ["simple_aggregate", "filtered_aggregate", "multi_condition",
                                      "time_window", "top_k", "trap"]},
        "paths": {"golden": "evals/golden", "configs": "evals/configs", "labels": "evals/labels",
                  "decisions": "evals/decisions.yaml", "hostile": ["evals/hostile.jsonl"],
                  "snapshots": "snapshots", "build": ".sqleval"},
    }
    (project / "sqleval.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return project, empty_null


def run_sqleval(args, group: list[str], questions: list[dict], files: dict[str, Path],
                root: Path, seconds: dict) -> tuple[dict, list[dict], list[str]]:
    """Outcomes per question index, the import's rejections, notes."""
    name = "spider_" + re.sub(r"\W", "_", group[0].lower())
    with timed(seconds, "sqleval: seeds + project"):
        project, empty_null = write_project(root, name, [files[db] for db in group])
    log = root / "sqleval.log"
    mine = [q for q in questions if q["db_id"] in group]
    with timed(seconds, "sqleval build"):
        out = sqleval(project, log, "build")
    if "[exit 0]" not in out:
        raise SystemExit(f"sqleval build failed for {group}; see {log}")
    dev = root / "dev.json"
    dev.write_text(json.dumps([q["entry"] for q in mine]), encoding="utf-8")
    with timed(seconds, "sqleval golden import"):
        sqleval(project, log, "golden", "import", str(dev), "--reviewer", "spider-dev",
                "--id-prefix", "sp", "--json", str(root / "import.json"))
    cases = [json.loads(l) for f in sorted((project / "evals/golden").glob("*.jsonl"))
             for l in f.read_text(encoding="utf-8").splitlines() if l.strip()]
    case_of = {int(c["provenance"]["source"].rsplit(":", 1)[1]): c for c in cases}
    report = json.loads((root / "import.json").read_text(encoding="utf-8"))
    rejected = [{"idx": mine[r["line"] - 1]["idx"], "db": mine[r["line"] - 1]["db_id"],
                 "reason": r.get("reason"), "gold": mine[r["line"] - 1]["query"]}
                for r in report.get("rejected", [])]
    answers = [{"case_id": case_of[i + 1]["id"], "run_index": r, "sql": q["pred"]}
               for i, q in enumerate(mine) if i + 1 in case_of for r in range(args.runs)]
    (project / "evals/answers/predictions.jsonl").write_text(
        "".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    config = project / "evals/configs/c3.yaml"
    config.write_text(yaml.safe_dump({
        "name": "spider-predictions", "description": f"{args.predictions}, replayed",
        "generator": {"kind": "recorded", "path": "evals/answers/predictions.jsonl"},
        "dialect": "sqlite", "runs": args.runs, "judge": "rules"}, sort_keys=False))
    with timed(seconds, "sqleval run"):
        sqleval(project, log, "run", "-c", str(config), "--quiet")
    with timed(seconds, "sqleval export"):
        sqleval(project, log, "export", "-c", str(config), "-o", str(root / "export"))
    rows = [json.loads(l) for f in (root / "export").glob("*/cases.jsonl")
            for l in f.read_text(encoding="utf-8").splitlines() if l.strip()]
    by_case: dict[str, list[dict]] = {}
    for r in rows:
        by_case.setdefault(r["case_id"], []).append(r)
    outcomes = {}
    for i, q in enumerate(mine):
        c = case_of.get(i + 1)
        if c is None:
            continue
        runs = sorted(by_case.get(c["id"], []), key=lambda r: r["run_index"])
        outcomes[q["idx"]] = {
            "case_id": c["id"], "outcomes": [r["outcome"] for r in runs],
            **{k: runs[0][k] if runs else None for k in (
                "outcome", "grade_reason", "mismatch", "diagnosis_category",
                "diagnosis_explanation", "execution_status", "execution_error_code", "result_rows")},
            "order_matters": c.get("order_matters"),
            "tie": bool((c.get("expected") or {}).get("tie")),
            "reference_sql": c.get("reference_sql"), "notes": c.get("notes")}
    return outcomes, rejected, empty_null


# --------------------------------------------------------------------------- comparison

def summarize(questions, official, keep, cli, results, rejected, notes, seconds, args) -> dict:
    table = Counter()
    disagreements, errors = [], []
    for q in questions:
        o, s = official.get(q["idx"], {}), results.get(q["idx"])
        if "error" in o:
            errors.append({"idx": q["idx"], "error": o["error"]})
            continue
        if s is None:
            continue
        ok = s["outcome"] in RIGHT
        table[(o["exec"], ok)] += 1
        table[("keep_distinct", keep[q["idx"]].get("exec") == ok)] += 1
        if o["exec"] != ok:
            disagreements.append({
                "idx": q["idx"], "db": q["db_id"], "question": q["question"],
                "gold": q["query"], "pred": q["pred"], "hardness": o["hardness"],
                "official": "match" if o["exec"] else "no match",
                "official_keep_distinct": "match" if keep[q["idx"]].get("exec") else "no match", **s})
    n = sum(v for k, v in table.items() if k[0] != "keep_distinct")
    official_total = sum(1 for q in questions if official.get(q["idx"], {}).get("exec"))
    return {
        "predictions": str(args.predictions), "databases": sorted({q["db_id"] for q in questions}),
        "questions": len(questions), "official_cli_execution_all": cli["execution_all"],
        "official_per_question_accuracy": official_total / len(questions),
        "official_cli_command": cli["command"], "official_errors": errors,
        "rejected_at_import": rejected,
        "rejected_pct": 100 * len(rejected) / len(questions),
        "compared": n,
        "table": {"official_match&sqleval_accepted": table[(True, True)],
                  "official_match&sqleval_rejected": table[(True, False)],
                  "official_no_match&sqleval_accepted": table[(False, True)],
                  "official_no_match&sqleval_rejected": table[(False, False)]},
        "agreement_pct": 100 * (table[(True, True)] + table[(False, False)]) / n if n else None,
        "official_keep_distinct_accuracy": sum(1 for q in questions if keep.get(q["idx"], {}).get(
            "exec")) / len(questions),
        "agreement_with_keep_distinct_pct": 100 * table[("keep_distinct", True)] / n if n else None,
        "sqleval_outcomes": dict(Counter(r["outcome"] for r in results.values())),
        "flipped_cases": [i for i, r in results.items() if len(set(r["outcomes"])) > 1],
        "disagreements": disagreements, "notes": notes, "seconds": seconds}


def markdown(s: dict) -> str:
    t = s["table"]
    out = [f"# sqleval vs Spider's official exec evaluator — {Path(s['predictions']).name}", "",
           f"{s['questions']} questions over {len(s['databases'])} databases; "
           f"official accuracy {s['official_per_question_accuracy']:.3f} per question "
           f"(evaluator CLI on the whole file: {s['official_cli_execution_all']}).", "",
           f"Rejected at import: {len(s['rejected_at_import'])} ({s['rejected_pct']:.1f}%)", ""]
    out += [f"* q{r['idx']} {r['db']}: {r['reason']}" for r in s["rejected_at_import"]]
    out += ["", "| | sqleval accepted | sqleval rejected |", "|---|---:|---:|",
            f"| official match | {t['official_match&sqleval_accepted']} "
            f"| {t['official_match&sqleval_rejected']} |",
            f"| official no match | {t['official_no_match&sqleval_accepted']} "
            f"| {t['official_no_match&sqleval_rejected']} |",
            "", f"Agreement: {s['agreement_pct']:.2f}% of {s['compared']} compared questions. "
            f"sqleval outcomes (run 0): {s['sqleval_outcomes']}; cases whose runs flipped: "
            f"{s['flipped_cases'] or 'none'}.", "",
            f"With the evaluator's `--keep_distinct` (DISTINCT not stripped) its accuracy is "
            f"{s['official_keep_distinct_accuracy']:.3f} and the agreement "
            f"{s['agreement_with_keep_distinct_pct']:.2f}%.", "", "## Disagreements", ""]
    for d in s["disagreements"]:
        out += [f"### q{d['idx']} ({d['db']}, {d['hardness']}): official {d['official']}, "
                f"sqleval {d['outcome']} (official with --keep_distinct: "
                f"{d['official_keep_distinct']})", "", f"* question: {d['question']}",
                f"* gold: `{d['gold']}`", f"* predicted: `{d['pred']}`",
                f"* sqleval: {d['grade_reason']}; {d['mismatch'] or ''} "
                f"(rules judge: {d['diagnosis_category']}; order_matters={d['order_matters']}, "
                f"tie={d['tie']})", ""]
    out += ["## Wall time (s)", ""] + [f"* {k}: {v}" for k, v in s["seconds"].items()]
    out += ["", "## Notes", ""] + [f"* {n}" for n in s["notes"]]
    return "\n".join(out) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spider-dir", required=True, type=Path)
    p.add_argument("--predictions", required=True, type=Path)
    p.add_argument("--evaluator-dir", required=True, type=Path)
    p.add_argument("--python", required=True, help="the evaluator's Python (with nltk)")
    p.add_argument("--dbs", help="comma-separated db_ids (default: every database present)")
    p.add_argument("--workdir", required=True, type=Path)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    seconds: dict[str, float] = {}
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=False)
    dev = json.loads((args.spider_dir / "dev.json").read_text(encoding="utf-8"))
    preds = args.predictions.read_text(encoding="utf-8").splitlines()
    if len(preds) != len(dev):
        raise SystemExit(f"{len(preds)} predictions for {len(dev)} questions")
    present = {d.name: d / f"{d.name}.sqlite" for d in (args.spider_dir / "database").iterdir()
               if (d / f"{d.name}.sqlite").is_file()}
    wanted = set(args.dbs.split(",")) if args.dbs else {e["db_id"] for e in dev}
    notes = [f"databases of dev.json without a SQLite file, skipped: {sorted(wanted - set(present))}"
             ] if wanted - set(present) else []
    wanted &= set(present)
    questions = [{"idx": i, "entry": e, "db_id": e["db_id"], "query": e["query"],
                  "question": e["question"], "pred": preds[i].strip()}
                 for i, e in enumerate(dev) if e["db_id"] in wanted]
    official, keep, cli = run_official(args, questions, work, seconds)
    files = {db: present[db] for db in sorted(wanted)}
    groups = group_databases(files)
    notes.append(f"sqleval projects (databases grouped so that no table name clashes): {groups}")
    results, rejected = {}, []
    for k, group in enumerate(groups):
        out, rej, empty_null = run_sqleval(args, group, questions, files, work / f"project{k}", seconds)
        results.update(out)
        rejected += rej
        notes += [f"empty strings stored as NULL (empty_strings='null'): {e}" for e in empty_null]
    s = summarize(questions, official, keep, cli, results, rejected, notes, seconds, args)
    (work / "summary.json").write_text(json.dumps(s, indent=1, default=str), encoding="utf-8")
    md = markdown(s)
    (work / "summary.md").write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
