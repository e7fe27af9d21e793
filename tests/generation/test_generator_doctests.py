"""The docstring examples of the providers, the generator adapters and the fakes run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "sqleval_pipeline.providers",
    "sqleval_pipeline.providers.errors",
    "sqleval_pipeline.providers.env",
    "sqleval_pipeline.providers.retry",
    "sqleval_pipeline.providers.anthropic",
    "sqleval_pipeline.providers.http",
    "sqleval_pipeline.generation._common",
    "sqleval_pipeline.generation.retry",
    "sqleval_pipeline.generation.anthropic_gen",
    "sqleval_pipeline.generation.openai_gen",
    "sqleval_pipeline.generation.http_gen",
    "sqleval_pipeline.generation.recorded",
    "sqleval_pipeline.generation.callable_gen",
    "tests.generation.fakes",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
