# Two commands: `make demo` tries slack-ask with no workspace and no Redis; `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "slack-ask needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[demo,dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/slack-ask demo

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_bot
	$(BIN)/python -m benchmarks.bench_sweeper
	$(BIN)/python -m benchmarks.bench_fairness

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
