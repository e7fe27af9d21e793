"""``configuration_status``: one row per active configuration — its current version, accuracy
with interval and gate — observed after every gate (reporting/status.py), whichever
configuration ran. A failed gate stays failed there until that configuration's next version
or batch has a gate result of its own; nothing to compare with shows as ``not evaluated``."""

import dagster as dg

from sqleval_pipeline.reporting.status import ConfigurationStatus, configuration_statuses, status_markdown
from sqleval_pipeline.configs import load_configs

STATUS_KEY = dg.AssetKey("configuration_status")

configuration_status = dg.AssetSpec(
    STATUS_KEY, group_name="evaluation_status", kinds={"python"},
    description="Every active configuration's current version, accuracy (95% interval) and "
                "regression gate, failing first. Observed after each gate: a red gate stays "
                "red until that configuration's next version or batch passes, whatever ran since.")

_COLUMNS = [("configuration", "string"), ("current_version", "string"), ("gate", "string"),
            ("accuracy (%)", "float"), ("interval (%)", "string"), ("gated_version", "string"),
            ("gated_batch", "string"), ("note", "string")]


def status_metadata(statuses: list[ConfigurationStatus]) -> dict:
    return {
        "configurations": dg.MetadataValue.table(
            records=[dg.TableRecord(s.row()) for s in statuses],
            schema=dg.TableSchema(columns=[dg.TableColumn(n, t) for n, t in _COLUMNS])),
        "failing": sum(s.gate == "failed" for s in statuses),
        "summary": dg.MetadataValue.md(status_markdown(statuses)),
    }


def observe_status(env) -> dg.AssetObservation:
    """The observation of every active configuration's status, read from the store."""
    current = [(c.name, c.partition_key) for c in load_configs(env.configs_dir, project=env.project, errors=[])
               if c.config.active]
    return dg.AssetObservation(asset_key=STATUS_KEY,
                               metadata=status_metadata(configuration_statuses(env.store, current)))
