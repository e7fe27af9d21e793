"""The bundled demo project's own code: its deterministic raw-data step.

Nothing in the core imports this package; the demo's ``sqleval.yaml`` names
:func:`build_raw` as its ``raw_data`` step, exactly as a user's project would name its own
extract-and-load function.
"""

from __future__ import annotations

import json
from pathlib import Path

from importlib import resources
from sqleval_pipeline.demo.load import load_raw
from sqleval_pipeline.demo.rawgen import write_raw

#: the checksums of the generated raw files, pinned beside the generator (package data)
RAW_CHECKSUMS = Path(str(resources.files(__name__).joinpath("raw_checksums.json")))


def build_raw(raw_dir: Path, warehouse: Path) -> dict[str, int]:
    """Generate the commerce CSV files (same bytes on every machine), check them against the
    committed checksums, and load them into the warehouse's raw schemas.

    Returns rows per ``schema.table``; raises when a generated file differs from its
    committed checksum (the generator changed without the checksums being updated)."""
    checksums = write_raw(Path(raw_dir))
    pinned = json.loads(RAW_CHECKSUMS.read_text()) if RAW_CHECKSUMS.exists() else {}
    drifted = sorted(f for f, h in checksums.items() if pinned and pinned.get(f) != h)
    if drifted:
        raise RuntimeError(f"generated raw files differ from {RAW_CHECKSUMS.name}: {drifted}")
    return load_raw(Path(raw_dir), Path(warehouse))
