"""A missed night shows: the scorecards must have been updated after the nightly run's window."""

import datetime as dt
import warnings

import dagster as dg

# Check-based freshness (superseded by FreshnessPolicy in Dagster 1.13, whose evaluation
# needs a daemon feature switched on in the instance): it runs on its own sensor.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    #: the nightly schedule starts at 02:00 UTC; an evaluation is expected by 05:00
    scorecard_freshness = dg.build_last_update_freshness_checks(
        assets=["eval_scorecard"], deadline_cron="0 5 * * *",
        lower_bound_delta=dt.timedelta(hours=3), timezone="UTC",
        severity=dg.AssetCheckSeverity.WARN,
    )
    freshness_sensor = dg.build_sensor_for_freshness_checks(
        freshness_checks=scorecard_freshness, name="scorecard_freshness_sensor",
        minimum_interval_seconds=600, default_status=dg.DefaultSensorStatus.RUNNING,
    )
