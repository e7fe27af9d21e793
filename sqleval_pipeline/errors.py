"""The one root of every error sqleval raises on purpose.

Every exception class defined in ``sqleval_pipeline`` derives from :class:`SqlevalError`
(``tests/test_package_shape.py`` walks the package and fails on one that does not). Classes
that existed before the root keep their standard base too (``ConfigError`` is still a
``ValueError``), so code catching the standard type keeps working; new code catches
``SqlevalError``. An exception that is *not* a ``SqlevalError`` escaping to the command line
is a programming error and is shown as one.

Subclasses carry where the problem is when they know it: a file, a line, a field.
"""

from __future__ import annotations


class SqlevalError(Exception):
    """An error sqleval raises on purpose; its message says what is wrong and what to do."""


class InputError(SqlevalError, ValueError):
    """Bad input — a file, a line, a field or an option — with what to do about it. Still a
    ``ValueError`` (inside a pydantic validator it becomes part of a ValidationError)."""


__all__ = ["InputError", "SqlevalError"]
