"""The package's shape (issue 23): no import cycle, one error root.

* **No import cycle.** Every ``import`` of a package module by another — at module level *and*
  inside functions (a function-level import hides a cycle, it does not remove one) — is an
  edge; the graph must have no strongly connected component of more than one module. Read
  from the source with :mod:`ast`, so nothing is imported.
* **One error root.** Every exception class defined in the package derives from
  :class:`sqleval_pipeline.errors.SqlevalError` (the command line catches the root only).
* **Imports at the top.** An import inside a function is kept only where the module it loads is
  heavy or optional for its caller (Dagster, dbt, Great Expectations, matplotlib, scipy, an HTTP
  client stack, fsspec, the command line itself in the entry point), and it says so: a comment
  on its line or on the line above its block of imports.
* **The top level is not a stage.** At most a dozen modules sit beside the packages, and
  none of them is a stage of a batch or a helper of one (those live in
  :mod:`sqleval_pipeline.pipeline`).
* **The providers' SDKs are imported on use.** Loading the command line, the stages and the
  Dagster definitions imports neither the Anthropic nor the OpenAI SDK (about 1.2 s together,
  paid by every process otherwise).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

import sqleval_pipeline
from sqleval_pipeline.errors import SqlevalError

PACKAGE = Path(sqleval_pipeline.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("sqleval_pipeline", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(module: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    out = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        # a module importing its own package's __init__ (or a package its child) is not an edge
        if name and name != module and not module.startswith(name + ".") and not name.startswith(module + "."):
            out.append(name)
    return out


@functools.cache
def import_graph() -> dict[str, frozenset[str]]:
    """The package's import edges, read once per process (every test reads the same files)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(_targets(module, path, node, modules))
    return {m: frozenset(t) for m, t in graph.items()}


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # cli/common.py imports orchestrate (Dagster) inside a function only
    assert "sqleval_pipeline.orchestrate" in graph["sqleval_pipeline.cli.common"]
    assert "sqleval_pipeline.errors" in graph["sqleval_pipeline.snapshot"]


def test_no_import_cycle():
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


#: what a batch is made of: a top-level module named so is a stage that left its package
STAGE_MODULES = frozenset({
    "attempts", "executions", "grades", "diagnoses", "scorecard", "comparisons", "evaluation",
    "batch_files", "store", "storage", "records", "recordio", "streams", "environment", "casefile",
    "derived", "suite_checks", "calibration", "noop", "progress",
})


def test_the_top_level_holds_at_most_a_dozen_modules_and_no_stage():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    stages = sorted(p.stem for p in (PACKAGE / "pipeline").glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, f"{len(top)} top-level modules: {top}"
    assert not set(top) & STAGE_MODULES, sorted(set(top) & STAGE_MODULES)
    # the list above is the pipeline package's: a stage added there is named here too
    assert set(stages) <= STAGE_MODULES, sorted(set(stages) - STAGE_MODULES)


def function_level_imports(text: str) -> list[tuple[int, bool]]:
    """(line, documented) of every import inside a function of a module's source: documented
    when a comment is on the import's line or on the line above its block of imports.

    >>> function_level_imports("import os\\ndef f():\\n    # heavy\\n    import a\\n    import b\\n    import c  # x\\n")
    [(4, True), (5, True), (6, True)]
    >>> function_level_imports("def f():\\n    x = 1\\n    import a\\n")
    [(3, False)]
    """
    lines = text.splitlines()
    found = []
    for fn in ast.walk(ast.parse(text)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom) and (node.lineno, True) not in found \
                        and (node.lineno, False) not in found:
                    i = node.lineno - 1
                    while i > 0 and re.match(r"\s*(from \S+ )?import ", lines[i - 1]) and "#" not in lines[i - 1]:
                        i -= 1  # up to the first import of the block
                    documented = "#" in lines[node.lineno - 1] or (i > 0 and "#" in lines[i - 1]) or "#" in lines[i]
                    found.append((node.lineno, documented))
    return sorted(found)


def test_every_function_level_import_says_why_it_is_there():
    undocumented = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
                    for line, documented in function_level_imports(path.read_text(encoding="utf-8"))
                    if not documented]
    assert undocumented == [], ("imports inside functions without a reason (move them to the top, or say "
                                f"why they are lazy): {undocumented}")


def test_every_exception_class_derives_from_the_root():
    outside = []
    for info in pkgutil.walk_packages(sqleval_pipeline.__path__, "sqleval_pipeline."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
                    and not issubclass(obj, SqlevalError)):
                outside.append(f"{info.name}.{name}")
    assert outside == [], f"exception classes outside SqlevalError: {outside}"


def test_a_damaged_scorecard_is_an_input_error_naming_the_file(tmp_path):
    """The command line catches the root only: a damaged input must arrive as a SqlevalError
    (naming the file), not as the ValueError a JSON or pydantic failure raises."""
    import pytest

    from sqleval_pipeline.errors import InputError
    from sqleval_pipeline.scoring.scorecard import Scorecard

    cases = {"truncated.json": '{"schema_version": "sqleval.scorecard/1", "overall":',
             "foreign.json": '{"schema_version": "other/9"}',
             "a_list.json": "[1, 2]",
             "wrong_fields.json": '{"schema_version": "sqleval.scorecard/1", "overall": 3}'}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=name):
            Scorecard.load(path)
    with pytest.raises(InputError, match="missing.json"):
        Scorecard.load(tmp_path / "missing.json")


_LOAD_EVERYTHING = """
import sys
import sqleval_pipeline.cli, sqleval_pipeline.definitions, sqleval_pipeline.orchestrate
import sqleval_pipeline.generation, sqleval_pipeline.judging.llm, sqleval_pipeline.pipeline.diagnoses
import sqleval_pipeline.providers.anthropic, sqleval_pipeline.providers.http
print(sorted(m for m in ("anthropic", "openai") if m in sys.modules))
"""


def test_the_providers_sdks_are_imported_on_use_only():
    """(That making a client or mapping an error does import them, the providers' doctests run.)"""
    out = subprocess.run([sys.executable, "-c", _LOAD_EVERYTHING], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]"], out


def test_the_commands_entry_module_imports_nothing_of_the_cli():
    """The console script's module is re-run by every guard worker as it starts (the sandbox's
    fork server prepares each worker with the parent's main module): it must stay light, the
    CLI imported when the command runs."""
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["sqleval"].partition(":")
    out = subprocess.run([sys.executable, "-c", (
        f"import sys, {module} as m; assert callable(m.{func}); "
        "print(sorted(n for n in sys.modules if n.startswith('sqleval_pipeline') or n in ('typer', 'duckdb')))")],
        capture_output=True, text=True, check=True).stdout.split("\n")[0]
    # the process helpers (the garbage collector's settings, set before the CLI is imported)
    assert out == repr(sorted({"sqleval_pipeline", module, "sqleval_pipeline.processes"})), out
