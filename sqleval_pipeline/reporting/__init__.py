"""Renderings of results for people: rich console tables and Markdown reports of scorecards,
diffs, gate results (:mod:`sqleval_pipeline.reporting.scorecard`) and judge calibration
(:mod:`sqleval_pipeline.reporting.calibration`). The core packages (scoring, judging, guard)
compute; only this package and the CLI depend on rich."""
