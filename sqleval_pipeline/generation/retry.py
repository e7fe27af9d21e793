"""Re-export of :mod:`sqleval_pipeline.providers.retry` (retries moved there, shared with the judge).

``from sqleval_pipeline.generation.retry import call_with_retries`` keeps working; new code
imports from ``sqleval_pipeline.providers.retry``.

>>> from sqleval_pipeline.providers import retry
>>> call_with_retries is retry.call_with_retries and backoff_delay is retry.backoff_delay
True
"""

from __future__ import annotations

from sqleval_pipeline.providers.retry import DEFAULT_SEED, backoff_delay, call_with_retries

__all__ = ["DEFAULT_SEED", "backoff_delay", "call_with_retries"]
