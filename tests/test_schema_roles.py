"""The one schema-roles rule (warehouse/roles.py), and the two readers that use it: the golden
proposer's vocabulary and the bundled baseline's. Expected values are written by hand."""

import datetime as dt

import pytest

from sqleval_pipeline.generation.baseline_vocab import Vocabulary as BaselineVocabulary
from sqleval_pipeline.generation.context import Column, SchemaCatalog, TableInfo
from sqleval_pipeline.golden.vocabulary import vocabulary as golden_vocabulary
from sqleval_pipeline.warehouse.roles import (
    is_id_reference, is_key, is_label_number, is_measure, is_numeric, is_text, is_time, key_stem, role,
)


@pytest.mark.parametrize("name, key", [
    ("id", True), ("ID", True), ("order_id", True), ("customer_key", True), ("customer_sk", True),
    ("policy_pk", True), ("agent_fk", True), ("state_cd", True), ("state_code", True),
    ("idea", False), ("paid", False), ("valid", False), ("policy_no", False), ("zip", False),
    ("amount", False), ("keyword", False),
])
def test_what_a_key_is(name, key):
    assert is_key(name) is key


def test_key_stems():
    assert [key_stem(n) for n in ("order_id", "Customer_SK", "state_code", "id", "amount")] == \
        ["order", "customer", "state", "", None]


def test_types():
    assert [is_numeric(t) for t in ("INTEGER", "BIGINT", "DECIMAL(18,2)", "DOUBLE", "HUGEINT",
                                    "INTERVAL", "VARCHAR", "DATE", "POINT")] == \
        [True, True, True, True, True, False, False, False, False]
    assert [is_time(t) for t in ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIME", "VARCHAR")] == \
        [True, True, True, False, False]
    assert [is_text(t) for t in ("VARCHAR", "TEXT", "ENUM('a')", "INTEGER")] == [True, True, True, False]


def test_measures_leave_out_keys_and_labelling_numbers():
    assert is_measure("net_revenue", "DECIMAL(18,2)") and is_measure("quantity", "INTEGER")
    assert not is_measure("order_id", "BIGINT") and not is_measure("policy_pk", "INTEGER")
    for name in ("policy_no", "claim_number", "zip", "postal_code", "phone", "order_year", "month_of_sale"):
        assert is_label_number(name) and not is_measure(name, "INTEGER"), name
    assert not is_measure("gap", "INTERVAL")  # INTERVAL contains "INT", but is not a number
    assert is_id_reference("customer_id") and not is_id_reference("id") and not is_id_reference("customer_sk")


def test_roles():
    cases = {("order_id", "BIGINT"): "key", ("amount", "DOUBLE"): "measure", ("zip", "INTEGER"): "number",
             ("placed_at", "TIMESTAMP"): "time", ("city", "VARCHAR"): "text", ("flag", "BOOLEAN"): "other",
             ("state_code", "VARCHAR"): "key"}
    assert {k: role(*k) for k in cases} == cases


def _catalog():
    policies = TableInfo("dim_policies", "", [
        Column("policy_pk", "BIGINT"), Column("premium", "DECIMAL(12,2)"),
        Column("start_year", "INTEGER"), Column("region", "VARCHAR", samples=["north", "south"])])
    claims = TableInfo("fct_claims", "", [
        Column("claim_id", "BIGINT"), Column("policy_pk", "BIGINT"), Column("claim_number", "INTEGER"),
        Column("amount", "DOUBLE"), Column("wait", "INTERVAL"), Column("filed_on", "DATE")])
    return SchemaCatalog(dt.date(2025, 6, 30), [policies, claims])


def test_the_baseline_uses_the_shared_rule():
    v = BaselineVocabulary(_catalog())
    policies, claims = v.tables["dim_policies"], v.tables["fct_claims"]
    # policy_pk is a key (it was a summable number): the policies' primary key, the claims' join
    assert policies.pk == "policy_pk" and claims.fks == {"policy_pk": "dim_policies"}
    # a year, a claim number and an INTERVAL are not measures (they were)
    assert policies.numeric == ["premium"] and claims.numeric == ["amount"]


def test_the_golden_proposer_uses_the_shared_rule():
    v = {t.table: t for t in golden_vocabulary(_catalog(), None).tables}
    sums = {t: sorted(m.sql for m in tv.measures if m.how in ("sum", "avg")) for t, tv in v.items()}
    assert sums == {"dim_policies": ["sum(premium)"], "fct_claims": ["sum(amount)"]}
    distinct = [m.sql for m in v["fct_claims"].measures if m.how == "distinct"]
    assert distinct == []  # claim_id is the first column; policy_pk does not end in _id
