"""The guard policy's version is the same in every process: it identifies executions across
runs (a batch made yesterday is reused today only when the version matches)."""

import os
import subprocess
import sys

SCRIPT = """
from sqleval_pipeline.guard.policy import GuardPolicy
p = GuardPolicy(tables=frozenset({"main.orders", "main.customers", "main.products", "main.a", "main.b"}))
print(p.version)
"""


def test_policy_version_does_not_depend_on_the_hash_seed():
    versions = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        versions.add(out.stdout.strip())
    assert len(versions) == 1, versions
