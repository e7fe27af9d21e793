"""Fixtures: loopback fakes of the providers (started per test, NO_PROXY set) and a case context."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sqleval_pipeline.generation.base import GenerationContext
from tests.generation.fakes import FakeAnthropic, FakeOpenAI, FakeTextToSqlService, make_context


@pytest.fixture(autouse=True)
def _loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback calls must never go through a proxy configured in the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


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
