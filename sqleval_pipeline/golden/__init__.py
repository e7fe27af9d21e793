"""The golden set: case model, loading and validation, freezing and verification."""

from sqleval_pipeline.golden.loader import GoldenError, GoldenSet, load_golden
from sqleval_pipeline.golden.model import Case

__all__ = ["Case", "GoldenError", "GoldenSet", "load_golden"]
