"""The files the product reads at run time, shipped inside the package (package data).

    functions.yaml          the guard's reviewed function allowlist (guard/allowlist_gen.py)
    guard_policy.yaml       the default guard policy (a project's own policy file replaces it)
    hostile/*.jsonl         the bundled hostile suite (templates filled from each snapshot)
    prompts/*.j2            the default text-to-SQL prompt and the LLM judge's prompt
    demo/                   the demo project (only in a built wheel or sdist: copied there
                            from the repository's sqleval.yaml, dbt_project/, evals/ and
                            snapshots/ when the package is built; a checkout uses those)

Everything is read through :func:`resource`, which goes through :mod:`importlib.resources`,
so an installed wheel reads exactly what it was built with; nothing here points into a
checkout.

>>> resource("functions.yaml").is_file()
True
>>> resource("no such file")
Traceback (most recent call last):
...
sqleval_pipeline.data.MissingResourceError: sqleval is installed without its package data file 'no such file' ...
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from sqleval_pipeline.errors import SqlevalError


class MissingResourceError(SqlevalError, RuntimeError):
    """A file the package must carry is absent: the installation is incomplete."""


def resource(*parts: str) -> Path:
    """The path of a package data file (or folder) under ``sqleval_pipeline/data``.

    The package is installed as files (wheels are unpacked), so the traversable is a real
    path; anything else is an installation this product does not support and is named."""
    node = resources.files(__name__).joinpath(*parts)
    if not isinstance(node, Path):
        raise MissingResourceError(f"sqleval's package data is not on the file system ({node!r}); "
                                   "install the wheel with pip (not as a zip)")
    if not node.exists():
        name = "/".join(parts)
        raise MissingResourceError(
            f"sqleval is installed without its package data file {name!r} (looked in {node}); "
            "reinstall it from a wheel built with `python -m build`")
    return node
