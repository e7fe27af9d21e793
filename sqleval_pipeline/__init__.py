"""sqleval: execution-accuracy evaluation and hard guardrails for text-to-SQL systems."""

__version__ = "0.1.0"
