# Two entry points for a fresh machine with Python 3.11+: `make demo` and `make test`.
# Each creates .venv when it is missing and reinstalls only when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080

.PHONY: demo test quick lint bench simulator screenshots manifests image-check clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/clusterbot demo --port $(PORT)

simulator: $(STAMP)
	$(BIN)/clusterbot simulator

lint: $(STAMP)
	$(BIN)/ruff check bot handlers tests benchmarks
	$(BIN)/ruff format --check bot handlers tests benchmarks
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q -n auto

# Fast feedback while working: lint, types and the pure and in-memory tests (tests/quick.py).
quick: lint
	$(BIN)/python -m pytest -q -n auto --quick

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# Tests never write into the tree; this refreshes the README's screenshots on purpose.
screenshots: $(STAMP)
	CLUSTERBOT_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/test_demo_page.py

# The Slack manifests' usage hint, made again from the subcommands every capability declares.
manifests: $(STAMP)
	$(BIN)/python -m bot.manifest docs/deploy/slack

# Build the Dockerfile's image and run it (buildah and podman, no Docker daemon needed; root).
image-check:
	docs/deploy/image/check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
