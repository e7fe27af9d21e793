# sqleval — two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export SQLEVAL_HOME ?= $(CURDIR)/.sqleval
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
export DO_NOT_TRACK := 1
export NO_PROXY := 127.0.0.1,localhost

.PHONY: demo test install ui bench clean help

help:
	@echo "make demo   build the warehouse and snapshot, verify the golden set, run the main job"
	@echo "make test   run the test suite (installs .venv from requirements.lock when missing)"
	@echo "make ui     open the Dagster UI on the same instance the CLI records runs in"
	@echo "make bench  run the benchmarks under benchmarks/"
	@echo "make clean  remove build outputs (.sqleval, dbt target); keeps .venv"

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sqleval demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

ui: $(STAMP)
	@mkdir -p $(SQLEVAL_HOME)/dagster_home
	@test -f $(SQLEVAL_HOME)/dagster_home/dagster.yaml || printf 'telemetry:\n  enabled: false\n' > $(SQLEVAL_HOME)/dagster_home/dagster.yaml
	PATH=$(CURDIR)/$(BIN):$$PATH DAGSTER_HOME=$(SQLEVAL_HOME)/dagster_home $(BIN)/dagster dev -w workspace.yaml

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(SQLEVAL_HOME) dbt_project/target dbt_project/logs logs
