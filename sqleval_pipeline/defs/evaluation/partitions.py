"""One dynamic partition per configuration version (``<name>@<hash8>``)."""

import dagster as dg

config_versions = dg.DynamicPartitionsDefinition(name="config_versions")
