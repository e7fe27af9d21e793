"""Fixtures for the guard tests: one warm executor on the session's serving snapshot.

Timeouts are short here (tests.conftest.BOMB_LIMITS) so that resource bombs are contained
quickly; the mechanism is the one production uses.
"""

from __future__ import annotations


import pytest

from sqleval_pipeline.guard.executor import GuardedExecutor
from sqleval_pipeline.guard.policy import load_policy
from sqleval_pipeline.guard.statement_filter import StatementFilter
from sqleval_pipeline.snapshot import file_checksum
from tests.conftest import BOMB_LIMITS

TEST_OVERRIDES = {"limits": BOMB_LIMITS}


@pytest.fixture(scope="session")
def guard_policy(serving_snapshot):
    return load_policy(overrides=TEST_OVERRIDES, served=list(serving_snapshot.manifest.tables))


@pytest.fixture(scope="session")
def statement_filter(guard_policy, serving_snapshot):
    return StatementFilter(guard_policy, database_names={serving_snapshot.snapshot_id})


@pytest.fixture(scope="session")
def checksum_before(serving_snapshot):
    """The serving file's SHA-256 before any guard test ran."""
    return file_checksum(serving_snapshot.path)


@pytest.fixture(scope="session")
def guard(serving_snapshot, guard_policy, checksum_before):
    """A warm guarded executor shared by the guard tests."""
    ex = GuardedExecutor(serving_snapshot.path, as_of=serving_snapshot.manifest.as_of, policy=guard_policy)
    yield ex
    ex.close()
    assert file_checksum(serving_snapshot.path) == checksum_before, "the serving snapshot was modified"
