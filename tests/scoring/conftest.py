from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoring_data import BASELINE, CANDIDATE, make_grades  # noqa: E402


@pytest.fixture
def base_grades():
    return make_grades("cfgA", BASELINE)


@pytest.fixture
def cand_grades():
    return make_grades("cfgB", CANDIDATE)
