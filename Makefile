# Two commands on a fresh clone: `make serve` runs the service, `make test` runs every check.
# Both create .venv at the repo root and install the locked dependencies when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck pytest machine-ready docker-ready packages-ready image-caches images serve bench bench-peers bench-core clean

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

# pytest-xdist: PYTEST_WORKERS processes, each module run whole by one worker (its module
# fixtures start once), the modules in the order tests/conftest.py gives them (longest
# first). docs/testing.md says how a test stays safe in parallel.
PYTEST_WORKERS ?= 3
pytest: $(STAMP) machine-ready
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest -q \
		-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Everything the suite needs from outside is fetched here, before pytest: the tests' own
# traffic stays on 127.0.0.1. Each step is quiet and idempotent; when one fails, the tests
# that need it say why (and fail with CI=true), so these steps never stop the run.
machine-ready: docker-ready packages-ready image-caches

# tests/docker needs dockerd, docker-compose and debootstrap: installed through apt and
# started when missing.
docker-ready:
	@docker/ensure-docker.sh || echo "docker-ready: not ready; tests/docker will say why"

# Chromium (browser tests) and redis-server (the Redis Streams sink), through apt.
packages-ready:
	@tools/ensure-packages.sh || echo "packages-ready: not ready; the tests needing them will say why"

# The docker test builds the images from the current source with nothing downloaded
# (TIMERSTORE_OFFLINE_NO_FETCH=1): the debootstrap base and the wheelhouse are cached here.
image-caches: $(STAMP) docker-ready
	@{ docker/build-offline.sh base && docker/build-offline.sh wheelhouse; } \
		>docker/image-caches.log 2>&1 \
		|| echo "image-caches: not filled (docker/image-caches.log); tests/docker will say why"

# The images with no registry: debootstrap base + wheelhouse (cached), then docker-compose build.
images: $(STAMP) docker-ready
	docker/build-offline.sh

serve: $(STAMP)
	$(BIN)/timerstore serve

bench-core: $(STAMP)  # the figures of docs/performance.md
	$(BIN)/python -m bench.core_throughput --timers 300000 --repeats 3 --stores rocks,heap

bench: $(STAMP)  # the RocksDB store beside the wheel, a heap and APScheduler (in-process)
	$(BIN)/timerstore bench --quick --stores rocks,wheel,heap,aps

bench-peers: $(STAMP) packages-ready  # beside what teams run today: NATS, Redis, PostgreSQL
	$(BIN)/timerstore bench --quick --stores rocks,nats,redis,postgres

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
