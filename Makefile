# PocketMQ developer commands. Every target sets up what it needs on a bare machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: setup test lint typecheck pytest namesrv run demo bench bench-store bench-compare install-peers clean

$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	$(BIN)/python -m pip install -e '.[dev,spark,compare]'
	@command -v java >/dev/null || { apt-get update && apt-get install -y openjdk-17-jre-headless; }
	@command -v ip >/dev/null || { apt-get update && apt-get install -y iproute2; }
	@touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/rmq-cluster up --preset $${PRESET:-2m-2s-sync} --namesrv 2 --base-dir $${BASE_DIR:-.rmq-cluster}

demo: $(STAMP)
	$(BIN)/python -m admin.demo

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
	-sh benchmarks/compare/install_peers.sh

bench-compare: $(STAMP) install-peers
	$(BIN)/rmq-bench compare

bench-store: $(STAMP)
	$(BIN)/rmq-bench store

clean:
	rm -rf $(VENV) .rmq-cluster .mypy_cache .pytest_cache .ruff_cache build *.egg-info
