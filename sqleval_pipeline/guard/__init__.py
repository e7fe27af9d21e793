"""Guarded execution of untrusted SQL (SPEC §3)."""
