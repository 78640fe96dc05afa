# gangkeeper — every target installs what it needs first. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Two worker processes, each file's tests on one of them (its module fixtures built once): the
# end-to-end tests mostly wait on processes and the clock, the others compute. Empty runs one.
PYTEST_WORKERS ?= -n 2 --dist loadfile

.DEFAULT_GOAL := help

.PHONY: help install test test-fast lint demo bench render clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Quiet, and on stderr: what a target prints on stdout is its output (`make render > x.yaml`).
$(STAMP): setup.cfg pyproject.toml harness/setup.cfg harness/pyproject.toml
	@echo "installing gangkeeper and its harness into $(VENV)/ ..." >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) >&2
	@$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip >&2
	@$(BIN)/pip install --quiet --disable-pip-version-check -e . -e './harness[test]' >&2
	@touch $(STAMP)

install: $(STAMP) ## create .venv/ with gangkeeper and its harness (editable), the test tools and kubectl
	@$(BIN)/gangkeeper --version

test: lint ## run every test (unit, HTTP, end-to-end, the built wheel) after the lint checks, in two workers
	$(BIN)/pytest $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-fast: lint ## the quick tests: no processes started (no end-to-end suites), none marked slow
	$(BIN)/pytest -m 'not e2e and not slow' $(PYTEST_ARGS)

lint: $(STAMP) ## ruff (unused or undefined names, import order, component folders by folder name), hadolint (Dockerfile), the import contracts and the product's types (setup.cfg)
	$(BIN)/ruff check --no-cache .
	$(BIN)/hadolint Dockerfile
	$(BIN)/python harness/lint_imports.py
	$(BIN)/python harness/typecheck.py

demo: $(STAMP) ## run the main scenario on the built-in cluster emulation
	$(BIN)/gangkeeper demo

.PHONY: playground
playground: $(STAMP) ## the emulated cluster with gangkeeper installed, for kubectl (PLAYGROUND_ARGS: sim serve flags)
	$(BIN)/gangkeeper sim serve $(PLAYGROUND_ARGS)

bench: $(STAMP) ## run the benchmarks and write bench/RESULTS.md
	$(BIN)/gangkeeper bench all --results bench/RESULTS.md

render: $(STAMP) ## print the rendered deploy/default manifests
	@$(BIN)/kubectl kustomize deploy/default

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
