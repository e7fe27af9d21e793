"""Fixtures: loopback fakes of the OpenAI API and a team service, and a case context (the
Anthropic fake and the NO_PROXY setting are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sqleval_pipeline.generation.base import GenerationContext
from tests.generation.fakes import FakeOpenAI, FakeTextToSqlService, make_context


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake_service() -> Iterator[FakeTextToSqlService]:
    with FakeTextToSqlService() as fake:
        yield fake


@pytest.fixture
def ctx() -> GenerationContext:
    return make_context()


@pytest.fixture
def waits() -> list[float]:
    """A fake sleep's record: pass ``sleep=waits.append`` to ``call_with_retries``."""
    return []
