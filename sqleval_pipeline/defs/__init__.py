"""Dagster shell: thin assets over the pure core, one folder per domain."""

import os

# dbt: no tracking look-ups (the similarly named DBT_SEND_ANONYMOUS_STATS does nothing).
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
