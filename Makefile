# PocketMQ developer commands. Every target sets up what it needs on a bare machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

# PURE=1 runs everything from the .py sources (POCKETMQ_PURE_PYTHON=1, see pocketmq/common/compiled.py) and builds nothing.
PURE ?=
ifeq ($(PURE),1)
export POCKETMQ_PURE_PYTHON := 1
endif

.PHONY: setup compiled clean-compiled test-pure test lint typecheck pytest namesrv run demo bench bench-store bench-compare install-peers clean docs dist test-installed install-chromium install-node console bench-console docker-engine test-docker

$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	POCKETMQ_PURE_PYTHON=1 $(BIN)/python -m pip install -e '.[dev,spark,compare]'
	-$(BIN)/python -m pip install 'Cython>=3.0'
	@command -v java >/dev/null || { apt-get update && apt-get install -y openjdk-17-jre-headless; }
	@command -v ip >/dev/null || { apt-get update && apt-get install -y iproute2; }
	@touch $(STAMP)

setup: $(STAMP) compiled

# The compiled hot path (Cython, in place beside the sources; setup.py): only what changed is rebuilt, and a
# failed build (or no Cython, no compiler: the leading "-") leaves the plain-Python modules in use.
compiled: $(STAMP)
ifneq ($(PURE),1)
	-$(BIN)/python setup.py -q build_ext --inplace --parallel 2
endif

clean-compiled:
	find pocketmq -name '*.so' -delete
	rm -rf build/cython

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two test processes for everything but the container test, which runs alone afterwards (it builds images).
pytest: $(STAMP) compiled install-chromium install-node docker-engine
	$(BIN)/pytest -q -n 2 -m "not docker" --durations=30
	$(BIN)/pytest -q -p no:cacheprovider -m docker

# The byte-exact codec tests and the compiled-build check from the plain sources (CI runs them beside `test`).
test-pure: $(STAMP)
	POCKETMQ_PURE_PYTHON=1 $(BIN)/pytest -q -p no:cacheprovider tests/test_compiled.py tests/common tests/remoting \
		tests/ha/test_wire.py tests/store/test_commitlog.py tests/store/test_dispatch_kernel.py tests/index/test_kernel.py \
		tests/client/consumer/test_fast_decode.py

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/rmq-cluster up --preset $${PRESET:-2m-2s-sync} --namesrv 2 --base-dir $${BASE_DIR:-.rmq-cluster}

demo: $(STAMP)
	$(BIN)/python -m pocketmq.admin.demo

namesrv: $(STAMP)
	$(BIN)/rmq-namesrv --port $${PORT:-9876} --log-format console

bench: $(STAMP)
	$(BIN)/rmq-bench store
	$(BIN)/rmq-bench produce --mode sync --senders 1
	$(BIN)/rmq-bench produce --mode sync
	$(BIN)/rmq-bench produce --mode batch
	$(BIN)/rmq-bench consume
	$(BIN)/rmq-bench ha
	$(BIN)/rmq-bench spark
	$(MAKE) bench-compare

# The peer brokers of `rmq-bench compare` (Debian packages); a peer that cannot be installed is reported by the
# benchmark, not dropped, hence the leading '-'.
install-peers:
	-sh scripts/install_peers.sh

bench-compare: $(STAMP) install-peers
	$(BIN)/rmq-bench compare

# Debian's chromium for the console's browser tests (tests/console/test_browser.py drives it with Playwright, whose
# own browser download cannot work on these machines); kept when already installed.
install-chromium:
	@command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }

# Node.js and npm for the official RocketMQ 5 Node.js client's tests (tests/grpc/node.py installs the client from
# its lock file); Debian's packages when the machine has none, kept when already installed.
install-node:
	@{ command -v node && command -v npm; } >/dev/null || { apt-get update && apt-get install -y nodejs npm; }

# The console on a local name server (rmq-console --with-namesrv); add users with `rmq-console adduser`.
console: $(STAMP)
	$(BIN)/rmq-console --with-namesrv --namesrv-port $${PORT:-9876} --port $${CONSOLE_PORT:-8080} \
		--users-file $${USERS_FILE:-console-users}

bench-console: $(STAMP) install-chromium
	$(BIN)/rmq-bench console

bench-store: $(STAMP)
	$(BIN)/rmq-bench store

clean: clean-compiled
	rm -rf $(VENV) .rmq-cluster .mypy_cache .pytest_cache .ruff_cache build dist *.egg-info

# docs/configuration.md, generated from the configuration dataclasses (tests/test_config_reference.py checks it).
docs: $(STAMP)
	$(BIN)/python scripts/gen_config_reference.py

# The sdist, then the wheel built from it, into dist/ (with PURE=1, or where no C compiler works: a pure-Python wheel).
dist: $(STAMP)
	$(BIN)/python -m build

# What a user installs, tested as a user runs it (tests/packaging; docs/install.md). `make pytest` runs it too.
test-installed: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/packaging

# The container engine tests/docker starts and stops itself (Debian's docker.io and docker-compose, and debootstrap
# for its base image). Where they cannot be installed (not root, no apt-get) that test is skipped with the reason.
docker-engine:
	@{ command -v dockerd && command -v docker-compose && command -v debootstrap; } >/dev/null || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io docker-compose debootstrap; } || \
		echo "docker-engine: not installed here; tests/docker will be skipped"

# docker compose up on a private engine, as tests/docker/test_compose.py runs it (docs/docker.md).
test-docker: $(STAMP) docker-engine
	$(BIN)/pytest -q -m docker tests/docker
