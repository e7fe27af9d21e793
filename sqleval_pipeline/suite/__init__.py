"""Test-suite accuracy (docs/test-suite.md): neighbour databases that tell a right answer
from one that is right by accident on the pinned snapshot.

Execution accuracy on one database accepts wrong SQL that happens to return the right rows
there: ``>=`` for ``>`` when no row sits on the boundary, ``COUNT(*)`` for ``COUNT(col)``
when no value is NULL, an inner join where every row matches, a filter that removes nothing
today. A *suite* of small neighbour databases, chosen so that each one makes some such
mistake visible, catches them.

Layout (each module uses only those above it):

- :mod:`~sqleval_pipeline.suite.constraints`: the dbt tests of the served models (unique,
  not_null, accepted_values, relationships) that every neighbour keeps;
- :mod:`~sqleval_pipeline.suite.probes`: what the golden references look at (witness rows,
  boundaries, literals), read with sqlglot;
- :mod:`~sqleval_pipeline.suite.source`: the snapshot, numbered in a canonical order, with
  each column's domain;
- :mod:`~sqleval_pipeline.suite.generate`: the rows of one neighbour (seeded, by kind);
- :mod:`~sqleval_pipeline.suite.files`: repair and a reproducible DuckDB file;
- :mod:`~sqleval_pipeline.suite.neighbours`: the content-addressed neighbour set, built or
  reused (:func:`ensure_neighbours`, :class:`NeighbourRef`);
- :mod:`~sqleval_pipeline.suite.model`: ``suite.json``;
- :mod:`~sqleval_pipeline.suite.check`: what grading uses — :func:`load_suite`,
  :meth:`Suite.suite_for`, :func:`check_on_suite` → :class:`AccidentalMatch`;
- :mod:`~sqleval_pipeline.suite.known`: what the data tests prove about a query (mutants they
  make equivalent are not generated);
- :mod:`~sqleval_pipeline.suite.mutants`: mutants of a reference (sqlglot);
- :mod:`~sqleval_pipeline.suite.distill`: mutants run everywhere, kill matrix, greedy cover;
- :mod:`~sqleval_pipeline.suite.audit`: the whole of it for a golden set, and its findings
  (``sqleval golden audit --suite``).

Nothing here depends on Dagster; candidates run through an injected ``run(sql, path)``.
"""

from sqleval_pipeline.suite.check import (
    AccidentalMatch, GuardedRunner, ReferenceCache, Suite, SuiteError, check_on_suite, load_suite,
    readonly_runner, suite_for,
)
from sqleval_pipeline.suite.model import SUITE_FILE, CaseSuite, SuiteFile
from sqleval_pipeline.suite.neighbours import (
    NeighbourError, NeighbourRef, NeighbourSet, SetParams, ensure_neighbours, load_set, neighbours_root,
)

__all__ = [
    "SUITE_FILE", "AccidentalMatch", "CaseSuite", "GuardedRunner", "NeighbourError", "NeighbourRef", "NeighbourSet",
    "ReferenceCache", "SetParams", "Suite", "SuiteError", "SuiteFile", "check_on_suite", "ensure_neighbours",
    "load_set", "load_suite", "neighbours_root", "readonly_runner", "suite_for",
]
