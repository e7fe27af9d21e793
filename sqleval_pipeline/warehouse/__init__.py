"""The warehouse: deterministic raw data, loading, and the dbt project that builds it."""
