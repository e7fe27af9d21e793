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


def test_the_version_is_the_content_of_the_policy_it_is_read_from():
    """Computed once per policy object, the version still follows the fields: a copy with a
    field changed, or a policy with an override, has its own; an equal policy has the same."""
    from sqleval_pipeline.guard.policy import GuardPolicy

    p = GuardPolicy(tables=frozenset({"main.orders"}))
    before = p.version
    assert p.version == before == GuardPolicy(tables=frozenset({"main.orders"})).version
    changed = p.model_copy(update={"row_cap": 5})
    assert changed.version != before and changed.version == GuardPolicy(tables=frozenset({"main.orders"}),
                                                                         row_cap=5).version
    assert p.model_copy().version == before
    assert p.with_overrides({"limits": {"row_cap": 5}}).version == changed.version
    # the denylist pattern follows the fields too
    denying = p.model_copy(update={"denied_function_patterns": ("secret_.*",)})
    assert denying.function_denied("secret_fn") and not p.function_denied("secret_fn")
