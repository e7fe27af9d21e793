"""What a message returned to the system under test, or written to a report, may say.

Error messages come from DuckDB, the worker and the guard's own layers. Before any of them
leaves the guard (a :class:`~sqleval_pipeline.guard.executor.GuardResult`'s ``message``, and so
every execution record, guard log line and report) it is scrubbed of what tells an attacker
about the harness: filesystem paths, memory and size figures (``976.5 MiB used``), the values of
settings (``memory_limit``, ``threads`` …) and DuckDB's hints about which setting raised a
limit. The reason code keeps the meaning; the guard's own log keeps the limits it enforced.

>>> scrub_message('IO Error: Cannot open file "/home/me/.sqleval/snapshots/snap-1.duckdb": No such file')
'IO Error: Cannot open file "<path>": No such file'
>>> scrub_message("Out of Memory Error: failed to allocate data of size 16.0 MiB (976.5 MiB/976.5 MiB used)")
'Out of Memory Error: failed to allocate data of size <size>'
>>> scrub_message("could not allocate block of size 256.0 KiB (1.2GiB/1.2GiB used). "
...               "This limit was set by the 'max_temp_directory_size' setting.")
'could not allocate block of size <size>.'
>>> scrub_message("memory_limit=1GB, threads = 2, SET memory_limit TO '512MB'")
'memory_limit=<value>, threads = <value>, SET memory_limit TO <value>'
>>> scrub_message("The statement is 31000 bytes; the limit is 20000.")
'The statement is <size>; the limit is <value>.'
>>> scrub_message("Binder Error: column a/b not found, 3/4 rows, 1 /2, https://x.org/a")
'Binder Error: column a/b not found, 3/4 rows, 1 /2, https://x.org/a'
"""

from __future__ import annotations

import re

#: an absolute filesystem path (or one under ``~``): the snapshot directory, the home
#: directory, ~/.duckdb/extensions/..., the temp directory, any /a/b path; not a division
#: (``1/0``), a lone operator or a URL
_PATH = re.compile(r"""(?<![\w/:.~])~?/[^\s'"`(),;\[\]{}<>]*[A-Za-z_.~-][^\s'"`(),;\[\]{}<>]*""")
#: a size with a unit (``16.0 MiB``, ``1GB``, ``4096 bytes``)
_SIZE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:[KMGTPE]i?B|bytes?)(?![\w])", re.IGNORECASE)
#: a limit stated in words (``the limit is 20000``)
_LIMIT_WORDS = re.compile(r"\b((?:limit|cap|maximum|max)\s+(?:is|of)\s+)\d+(?:[,_.]\d+)*", re.IGNORECASE)
#: DuckDB's usage figure after a memory error, once its sizes are scrubbed
_USAGE = re.compile(r"\s*\(\s*<size>\s*/\s*<size>\s*(?:used)?\s*\)", re.IGNORECASE)
#: DuckDB's hint naming the setting that set a limit (and what it defaults to)
_HINT = re.compile(r"\s*(?:This limit was set by|By default,? this setting|See also)[^.]*\.?", re.IGNORECASE)
#: settings whose values describe the harness (memory, threads, time, files, zone)
_SETTINGS = ("memory_limit", "max_memory", "threads", "worker_threads", "max_temp_directory_size",
             "temp_directory", "max_execution_time", "statement_timeout", "timezone", "home_directory",
             "extension_directory", "secret_directory", "allowed_directories", "allowed_paths")
_SETTING_VALUE = re.compile(
    r"(?P<name>\b(?:" + "|".join(_SETTINGS) + r")\b['\"]?\s*(?:=|:|\bTO\b|\bis\b)\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s,;)]+)",
    re.IGNORECASE)


def scrub_paths(text: str | None) -> str | None:
    """``text`` with every absolute filesystem path replaced by ``<path>``.

    >>> scrub_paths("Extension ~/.duckdb/extensions/v1/linux/httpfs.duckdb_extension not found; see /tmp/x")
    'Extension <path> not found; see <path>'
    >>> scrub_paths("Permission Error: Cannot access file '/etc' or /root")
    "Permission Error: Cannot access file '<path>' or <path>"
    """
    if not text:
        return text
    return _PATH.sub("<path>", text)


def scrub_message(text: str | None) -> str | None:
    """``text`` without paths, size and usage figures, setting values or setting hints (see
    the module doc)."""
    if not text:
        return text
    text = _PATH.sub("<path>", text)
    text = _SETTING_VALUE.sub(lambda m: m.group("name") + "<value>", text)
    text = _SIZE.sub("<size>", text)
    text = _LIMIT_WORDS.sub(lambda m: m.group(1) + "<value>", text)
    text = _USAGE.sub("", text)
    return _HINT.sub("", text)


__all__ = ["scrub_message", "scrub_paths"]
