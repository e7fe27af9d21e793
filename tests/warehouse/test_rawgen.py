import csv
import datetime as dt
import hashlib
import io
import json

import pytest

from sqleval_pipeline.demo import RAW_CHECKSUMS
from sqleval_pipeline.demo.rawgen import AS_OF, FIRST_DAY, RAW_TABLES, SEED, generate, render_csv, write_raw

pytestmark = pytest.mark.slow  # every test generates the demo's raw data (seconds each)


@pytest.fixture(scope="module")
def data():
    """The demo's raw data at the default seed, generated once for the module (read only)."""
    return generate()


def test_same_bytes_twice_and_as_committed(data, built_warehouse):
    """Generated here (the module's data, rendered) and by the session build's raw-data step
    (``write_raw`` in another process, possibly another worker): the same bytes, and the
    committed checksums."""
    committed = json.loads(RAW_CHECKSUMS.read_text())
    assert set(committed) == {t.filename for t in RAW_TABLES}
    for t in RAW_TABLES:
        payload = render_csv(t, data[t.name])
        assert payload == (built_warehouse.raw_dir / t.filename).read_bytes(), t.filename
        assert hashlib.sha256(payload).hexdigest() == committed[t.filename], \
            "generator output changed: same seed must give the same bytes everywhere"


def test_write_raw_writes_what_it_renders_and_returns_its_checksums(tmp_path, monkeypatch):
    """``write_raw`` (the build's raw step) on a small stand-in for the generator: each file is
    the table rendered, and the checksums returned are those of the files' bytes."""
    import sqleval_pipeline.demo.rawgen as rawgen

    small = {t.name: [[f"{t.name}-{i}-{j}" for j, _c in enumerate(t.columns)] for i in range(3)]
             for t in RAW_TABLES}
    monkeypatch.setattr(rawgen, "generate", lambda seed=SEED: small)
    sums = write_raw(tmp_path / "raw")
    assert set(sums) == {t.filename for t in RAW_TABLES}
    for t in RAW_TABLES:
        body = (tmp_path / "raw" / t.filename).read_bytes()
        assert body == render_csv(t, small[t.name])
        assert sums[t.filename] == hashlib.sha256(body).hexdigest()


def test_a_different_seed_gives_different_data(data):
    assert SEED != 2 and generate(2)["orders"][:50] != data["orders"][:50]


def test_shape_of_the_business(data):
    orders = data["orders"]
    assert len(orders) >= 50_000
    dates = sorted(dt.date.fromisoformat(o[2][:10]) for o in orders)
    assert dates[0] == FIRST_DAY and dates[-1] == AS_OF
    assert (AS_OF - FIRST_DAY).days >= 18 * 30
    assert {o[3] for o in orders} == {"placed", "shipped", "delivered", "cancelled", "returned"}
    assert {o[4] for o in orders} == {"unified_payments", "card", "cod", "netbanking", "wallet"}
    # net = gross - discount in integer paise on every order
    for o in orders[:5000]:
        gross, disc, net = (round(float(x) * 100) for x in o[6:9])
        assert net == gross - disc
    assert {c[3] for c in data["customers"]} == {"A", "B", "C"}
    # prompt-injection payloads live in product descriptions
    assert sum("instructions" in p[6].lower() or "system:" in p[6].lower() for p in data["products"]) >= 2


def test_csv_header_matches_declared_columns(data):
    for t in RAW_TABLES:
        header = next(csv.reader(io.StringIO(render_csv(t, data[t.name][:1]).decode())))
        assert header == [c for c, _ in t.columns]
