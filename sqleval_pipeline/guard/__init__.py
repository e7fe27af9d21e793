"""Guarded execution of untrusted SQL (docs/guardrails.md)."""

import logging


class _QuietSqlglot(logging.Filter):
    """Untrusted SQL routinely makes sqlglot warn ("… contains unsupported syntax. Falling back
    to parsing as a 'Command'"). The guard refuses or re-checks every such statement, so these
    warnings are noise on consoles and in logs; errors still pass. Installed once, here, rather
    than by raising the logger's level around each parse."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


_sqlglot_logger = logging.getLogger("sqlglot")
if not any(isinstance(f, _QuietSqlglot) for f in _sqlglot_logger.filters):
    _sqlglot_logger.addFilter(_QuietSqlglot())
