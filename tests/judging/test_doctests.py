"""The docstring examples of the judge lane modules run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["sqleval_pipeline.judging.llm", "sqleval_pipeline.judging.calibration",
           "sqleval_pipeline.judging.rules", "sqleval_pipeline.judging.sql_facts",
           "sqleval_pipeline.judging.refusals",
           "sqleval_pipeline.reporting.calibration"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
