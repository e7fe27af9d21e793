# sqleval — two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The project the commands work on: the bundled demo unless SQLEVAL_PROJECT names another
# (a directory holding sqleval.yaml). Its build outputs go to its own build dir (.sqleval/).
PROJECT_DIR := $(abspath $(if $(SQLEVAL_PROJECT),$(SQLEVAL_PROJECT),$(CURDIR)))
DAGSTER_HOME_DIR = $(shell SQLEVAL_PROJECT=$(PROJECT_DIR) $(BIN)/python -c "from sqleval_pipeline.project import current; print(current().home.dagster_home)")
HOST ?= 127.0.0.1
PORT ?= 3000
# pytest-xdist workers for `make test`: three on the 2-core CI machine, because a quarter of a
# worker's time is spent waiting (on a UI to answer, a subprocess, a sandbox's timeout) and a
# third worker uses those gaps (measured: 9:23 with two, 7:25 with three, 7:51 with four). What
# a session builds once — the demo's foundation, the insurance example, the test suites — the
# first worker that needs it builds and the others reuse; TEST_WORKERS=0 runs the suite in one
# process. Each module is one unit of work, handed out longest first (tests/conftest.py LONGEST_FIRST)
TEST_WORKERS ?= 3
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
export DO_NOT_TRACK := 1
export NO_PROXY := 127.0.0.1,localhost
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (__pycache__ is ignored by git):
# the locked packages are installed without it, pytest rewrites the asserts of every test module
# on import and, without its cache, would redo it in every worker of every run, and every sqleval,
# dagster and guard-worker process would compile again what it imports
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast test-browser install ui bench clean help

help:
	@echo "make demo   build the warehouse and snapshot, verify the golden set, run the main job"
	@echo "make test   run the test suite (installs .venv from requirements.lock when missing)"
	@echo "make test-fast  the fast lane: the tests that build nothing (no dbt, no warehouse, no Dagster run)"
	@echo "make test-browser  open the HTML report in headless Chromium (installs Debian's chromium when missing)"
	@echo "make ui     open the Dagster UI on the instance the CLI records runs in (HOST, PORT, SQLEVAL_PROJECT)"
	@echo "make bench  run the benchmarks under benchmarks/"
	@echo "make clean  remove the demo's build outputs (.sqleval, dbt target and logs); keeps .venv"

install: $(STAMP)

# The locked requirements go in with uv (pinned; one pip install of a self-contained binary):
# it fetches and unpacks in parallel, about 6 s where pip took about 60 s on this machine. It
# also compiles their bytecode, on every core (about 10 s more): without it each module is
# compiled when first imported, by every test worker, dbt, dagster and guard process that
# starts before one of them has written it (a clean clone's `make test` took 7:11 without,
# 6:41 with). pip does both where uv cannot be installed.
UV := uv==0.13.8

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip install --quiet --disable-pip-version-check $(UV); then \
	  $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.lock; \
	else \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock; \
	fi
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sqleval demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# the fast lane: no dbt, no warehouse, no Dagster definitions (tests marked slow are left out).
# Pure CPU, nothing waited for: one worker per core (three took 71 s where two took 59 s)
FAST_WORKERS ?= 2
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(FAST_WORKERS) --dist load -m "not slow"

# the browser tests (pytest -m browser) are skipped by `make test` wherever /usr/bin/chromium is absent
test-browser: $(STAMP)
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest -q -m browser

# `sqleval ui` runs dagster dev in a process group of its own and stops it (and its webserver,
# daemon and code server) on SIGINT or SIGTERM; see docs/command-line.md
ui: $(STAMP)
	$(BIN)/sqleval --project "$(PROJECT_DIR)" ui --host $(HOST) --port $(PORT)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf .sqleval dbt_project/target dbt_project/logs logs
