"""Model providers shared by the systems under test (``generation``) and the LLM judge (``judging``).

One place for what every provider call needs:

- :mod:`~sqleval_pipeline.providers.errors` — :class:`ProviderError`, its codes, the HTTP
  status mapping, raw-response capping;
- :mod:`~sqleval_pipeline.providers.retry` — :func:`call_with_retries` (exponential backoff
  with jitter, honouring ``retry-after``);
- :mod:`~sqleval_pipeline.providers.env` — credentials and endpoints from the environment;
- :mod:`~sqleval_pipeline.providers.anthropic` — the Anthropic SDK client and its errors;
- :mod:`~sqleval_pipeline.providers.http` — OpenAI-compatible and plain JSON-over-HTTP
  clients and their errors.

The SDK modules (``anthropic``, ``http``) are not imported here, so importing the package
costs no SDK import.

>>> from sqleval_pipeline.providers import ProviderError, call_with_retries
>>> call_with_retries(lambda: "SELECT 1", max_retries=0)
('SELECT 1', 0)
"""

from __future__ import annotations

from sqleval_pipeline.providers.errors import ERROR_CODES, ProviderError
from sqleval_pipeline.providers.retry import backoff_delay, call_with_retries

__all__ = ["ERROR_CODES", "ProviderError", "backoff_delay", "call_with_retries"]
