"""sqleval as a product: built into a wheel and an sdist, installed into a fresh virtual
environment outside the checkout, it takes a foreign dbt project (every model served, seeds
read through ``source()``) through init → build → import → run → report with no file edited,
and writes the demo project out of the wheel.

The fresh environment holds only the wheel; its dependencies are the locked packages of the
checkout's ``.venv``, reached through a ``.pth`` line appended after the environment's own
site-packages (so the wheel's ``sqleval_pipeline`` is the one imported, never the checkout),
and the console scripts of those dependencies (``dbt``, ``dagster``) are written the way pip
writes them. That keeps the test to seconds of installing instead of minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from tests.conftest import HOSTILE_ONLY_KILL_GRACE_S, HOSTILE_ONLY_TIMEOUT_S

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
JAFFLE = FIXTURES / "projects" / "jaffle_source_seeds"
QUESTIONS = FIXTURES / "wheel" / "questions.csv"
SCRIPTS = ("dbt", "dagster", "dagster-webserver", "dagster-daemon")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
                             f"\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """``python -m build`` of the checkout: an sdist, and a wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(location.REPO_ROOT)],
         cwd=out, env={**os.environ}, timeout=300)
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> dict:
    """A fresh virtual environment outside the checkout with only the wheel installed."""
    root = tmp_path_factory.mktemp("wheelenv")
    venv = root / "venv"
    # (without pip of its own: installing pip into it is 3 s of CPU the test does not need)
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root, env={**os.environ})
    py = venv / "bin" / "python"
    wheel = next(dist.glob("*.whl"))
    # the wheel only, installed for the environment's interpreter (pip's --python runs the install
    # with it: the scripts point at this environment, as with the environment's own pip)
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "--no-compile",
          "--disable-pip-version-check", "--quiet", str(wheel)], cwd=root, env={**os.environ})
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    locked = sysconfig.get_paths()["purelib"]  # the checkout's .venv: the locked dependencies
    (purelib / "zz_locked_dependencies.pth").write_text(locked + "\n")
    # the dependencies' console scripts, as pip would write them for an installed dependency
    _run([str(py), "-c", (
        "import os, sys\n"
        "from importlib.metadata import entry_points\n"
        f"wanted = {SCRIPTS!r}\n"
        "for ep in entry_points(group='console_scripts'):\n"
        "    if ep.name in wanted:\n"
        "        mod, _, attr = ep.value.partition(':')\n"
        "        path = os.path.join(os.path.dirname(sys.executable), ep.name)\n"
        "        with open(path, 'w') as f:\n"
        "            f.write(f'#!{sys.executable}\\nimport sys\\nfrom {mod} import {attr.split(\".\")[0]}\\n'\n"
        "                    f'sys.exit({attr}())\\n')\n"
        "        os.chmod(path, 0o755)\n")], cwd=root, env={**os.environ})
    env = {k: v for k, v in os.environ.items()
           if k not in ("SQLEVAL_PROJECT", "SQLEVAL_HOME", "PYTHONPATH", "VIRTUAL_ENV", "DAGSTER_HOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env["COLUMNS"] = "200"
    work = root / "work"
    work.mkdir()
    return {"venv": venv, "python": py, "sqleval": str(venv / "bin" / "sqleval"), "env": env,
            "work": work, "wheel": wheel, "purelib": purelib}


def _checkout_demo_files() -> set[str]:
    """The demo project's files as committed (git ls-files), independently of setup.py."""
    out = subprocess.run(["git", "ls-files", *location.DEMO_PARTS], cwd=location.REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return {p for p in out if (location.REPO_ROOT / p).exists()}


def test_the_wheel_and_the_sdist_carry_everything_the_product_reads(dist):
    wheel = next(dist.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    # every non-Python file the package reads at run time, found in the source tree
    package = location.REPO_ROOT / "sqleval_pipeline"
    data_files = {str(p.relative_to(location.REPO_ROOT)) for p in package.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    assert data_files and data_files <= names, sorted(data_files - names)
    demo = {n[len("sqleval_pipeline/data/demo/"):] for n in names if n.startswith("sqleval_pipeline/data/demo/")}
    assert demo == _checkout_demo_files()
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    pyproject = tomllib.loads((location.REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert f"Version: {pyproject['version']}" in text
    assert all(f"Requires-Dist: {d}" in text for d in pyproject["dependencies"])
    sdist = next(dist.glob("*.tar.gz"))
    members = {m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m}
    assert {"sqleval.yaml", "setup.py", "pyproject.toml"} <= members
    assert _checkout_demo_files() <= members


def test_installed_outside_the_checkout_it_imports_itself_and_names_its_version(installed):
    out = _run([str(installed["python"]), "-c", "import sqleval_pipeline; print(sqleval_pipeline.__file__)"],
               cwd=installed["work"], env=installed["env"]).stdout.strip()
    assert Path(out).is_relative_to(installed["purelib"]), out
    version = tomllib.loads((location.REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _run([installed["sqleval"], "--version"], cwd=installed["work"], env=installed["env"]).stdout.strip() \
        == f"sqleval {version}"
    # no project at hand: a sentence, not the checkout's demo
    proc = subprocess.run([installed["sqleval"], "golden", "stats"], cwd=installed["work"], env=installed["env"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "sqleval init" in proc.stderr and "sqleval demo" in proc.stderr, proc.stderr


def test_a_foreign_dbt_project_goes_through_init_build_import_run_report(installed):
    work, env, sqleval = installed["work"], installed["env"], installed["sqleval"]
    dbt_dir = work / "jaffle"
    shutil.copytree(JAFFLE, dbt_dir, ignore=shutil.ignore_patterns("target", "logs"))
    before = {p: p.read_bytes() for p in dbt_dir.rglob("*") if p.is_file()}
    _run([sqleval, "init", "myeval", "--dbt-project", "jaffle", "--as-of", "2018-04-30"], cwd=work, env=env)
    # (the bombs are stopped by a short statement timeout instead of 5 s, and a worker that does
    # not answer is killed 0.5 s after it instead of 2 s: same mechanism, quicker)
    _run([sqleval, "--project", "myeval", "build", "--guardrail-timeout", str(HOSTILE_ONLY_TIMEOUT_S),
          "--guardrail-kill-grace", str(HOSTILE_ONLY_KILL_GRACE_S)], cwd=work, env=env, timeout=900)
    # every model served, among them tables called policy, salaries, leak, expected_df: the
    # bundled hostile suite passes on it all the same
    guard = json.loads((work / "myeval" / ".sqleval" / "reports" / "guardrails.json").read_text())
    assert guard["passed"] and guard["checksum_unchanged"] and not guard["failures"]
    assert guard["statement_timeout_s"] == HOSTILE_ONLY_TIMEOUT_S
    assert guard["kill_grace_s"] == HOSTILE_ONLY_KILL_GRACE_S
    assert any(c["reason"] == "statement_timeout" for c in guard["cases"])  # a bomb met it
    assert not guard["not_hostile"] and len(guard["cases"]) > 300
    # a reviewer's own cases, naming the real tables, run as written
    own = work / "reviewer.jsonl"
    own.write_text("".join(json.dumps(d) + "\n" for d in [
        {"id": "stacked", "category": "writes", "sql": "SELECT * FROM orders; DROP TABLE orders"},
        {"id": "delete", "category": "writes", "sql": "DELETE FROM policy"},
        {"id": "bomb", "category": "bombs", "sql": "SELECT count(*) FROM orders a, orders b, orders c, "
                                                   "range(1000000) r1, range(1000000) r2"},
        {"id": "read", "category": "plain", "sql": "SELECT status, count(*) FROM orders GROUP BY 1"}]))
    ran = _run([sqleval, "--project", "myeval", "guardrails", "run", "--cases", str(own), "--json", "own.json",
                "--timeout", "1"],
               cwd=work, env=env)
    mine = json.loads((work / "own.json").read_text())
    verdicts = {c["case_id"]: c["verdict"] for c in mine["cases"]}
    assert verdicts == {"stacked": "blocked", "delete": "blocked", "bomb": "blocked", "read": "not_hostile"}, verdicts
    assert "not hostile on this project" in ran.stdout and "read" in ran.stdout
    # the questions' references were reviewed already: imported as verified, so they count
    imported = _run([sqleval, "--project", "myeval", "golden", "import", str(QUESTIONS),
                     "--reviewer", "qa", "--json", "import.json"], cwd=work, env=env)
    report = json.loads((work / "import.json").read_text())
    assert len(report["accepted"]) == 6 and not report["rejected"], imported.stdout
    _run([sqleval, "--project", "myeval", "run", "-c", "myeval/evals/configs/baseline.yaml"], cwd=work, env=env)
    _run([sqleval, "--project", "myeval", "report", "-o", "report.html"], cwd=work, env=env)
    assert (work / "report.html").stat().st_size > 10_000
    cards = list((work / "myeval" / ".sqleval" / "store" / "runs").glob("baseline@*/*/scorecard.json"))
    assert len(cards) == 1
    card = json.loads(cards[0].read_text())
    assert card["overall"]["n_cases"] == 6
    # the user's dbt project is as it was: nothing written into it (dbt's target goes to the build dir)
    after = {p: p.read_bytes() for p in dbt_dir.rglob("*") if p.is_file()}
    assert after == before


def test_the_wheel_writes_the_demo_project_out(installed):
    work, env, sqleval = installed["work"], installed["env"], installed["sqleval"]
    # `sqleval demo DIR` writes the project and then runs it end to end (minutes, the same run
    # as `make demo`); here the writing, from the wheel's own copy, and a command on it
    target = work / "demo-copy"
    _run([installed["python"].as_posix(), "-c",
          "from pathlib import Path; from sqleval_pipeline.demo.location import write_demo; "
          f"write_demo(Path({str(target)!r}))"], cwd=work, env=env)
    written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
    assert written == _checkout_demo_files()
    stats = _run([sqleval, "--project", str(target), "golden", "stats"], cwd=work, env=env)
    assert "commerce" in stats.stdout


def test_demo_dir_writes_into_a_new_or_empty_folder_and_refuses_a_foreign_one(tmp_path, monkeypatch):
    from typer import Exit

    from sqleval_pipeline.cli.demo import choose_demo_project

    written = choose_demo_project(tmp_path / "new")
    assert written == (tmp_path / "new" / "sqleval.yaml").resolve() and written.exists()
    assert choose_demo_project(tmp_path / "new") == written  # a second time: the same project, kept
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(Exit):
        choose_demo_project(tmp_path / "busy")
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]
