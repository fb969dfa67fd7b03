# Two commands: `make demo` tries slack-ask with no workspace and no Redis; `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint typecheck pytest bench lock clean

$(STAMP): pyproject.toml constraints.txt
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

# The suite runs in parallel (pytest-xdist). Most tests wait on sockets and child processes rather than
# compute, so two workers per core pay (measured in docs/development.md), capped at 8. `--dist loadgroup`
# keeps each `xdist_group` (a module sharing a Redis topology, the Chromium tests) on one worker. Tests
# marked `serial` hold the bot to wall-clock bounds (Slack's 3 s ack, pacing) and run alone afterwards.
# TEST_SELECT narrows both runs to a marker expression (`.ci/run` uses `redis` for the run without one).
CORES := $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)))')
PYTEST_WORKERS ?= $(shell echo $$(( 2 * $(CORES) < 8 ? 2 * $(CORES) : 8 )))
TEST_SELECT ?=
and_selected = $(if $(TEST_SELECT), and ($(TEST_SELECT)))

pytest: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not serial$(and_selected)"
	$(BIN)/pytest -m "serial$(and_selected)" || test $$? -eq 5  # 5: nothing selected is no failure

# The inner loop: the tests that need no Redis, no child process and no browser (contract, render, Block
# Kit, the fake Slack, docs, config), one worker a core (they compute: more workers only collect more);
# under a minute. `make test` is still the whole check.
test-fast: $(STAMP)
	$(BIN)/pytest -n $(CORES) -m "fast"

# Issue 22's per-ask and scale tables with their targets (docs/performance.md), then timers,
# fairness and the Home tab: about 5 minutes on 2 cores. BENCH_SIZES=10000,100000 shortens the scale table.
BENCH_SIZES ?= 10000,100000,1000000
bench: $(STAMP)
	$(BIN)/python -m benchmarks --sizes $(BENCH_SIZES)

# constraints.txt (what CI installs) from a fresh venv with the newest versions pyproject.toml allows.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	PIP_CONSTRAINT= .venv-lock/bin/python -m pip install -q -e '.[demo,dev]'
	{ sed -n '/^#/p' constraints.txt; .venv-lock/bin/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
