# Two commands on a fresh clone: `make serve` runs the service, `make test` runs every check.
# Both create .venv at the repo root and install the locked dependencies when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck pytest serve bench bench-core clean

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev]'
	touch $(STAMP)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest -q

serve: $(STAMP)
	$(BIN)/timerstore serve

bench-core: $(STAMP)
	$(BIN)/python -m bench.core_throughput

bench: $(STAMP)
	$(BIN)/timerstore bench --quick

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
