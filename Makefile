# Two commands: `make up` starts a local cluster, `make test` runs the whole suite.
# Both create .venv and install the locked dependencies when needed: `make up` only what running
# corral needs (requirements-runtime.lock), `make test` the test tools too (requirements.lock).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime

.PHONY: install system-deps up test bench mutation lock clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@ $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml requirements-runtime.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-runtime.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

install: $(STAMP)

# Debian packages the tests need: a Docker engine (docker.io), busybox-static (the tests build their
# container image from it; no image registry is reachable), etcd (etcd-server) and chromium (the
# dashboard's browser tests drive it through Playwright; no browser is downloaded). Installed only
# when missing.
system-deps:
	@if ! command -v dockerd >/dev/null 2>&1 || ! command -v busybox >/dev/null 2>&1 || ! command -v etcd >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then \
		echo "Installing Debian packages docker.io, busybox-static, etcd-server and chromium for the tests..."; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq docker.io busybox-static etcd-server chromium >/dev/null; \
	fi

# Both compile corral's own modules to bytecode first: where PYTHONDONTWRITEBYTECODE is set (as on the
# CI machine), every corral process would otherwise compile them again as it starts
# (tests/cli/test_cli.py, which runs the CLI and servers as processes: 62 s without, 53 s with it).
COMPILE := $(BIN)/python -m compileall -q -j 0 src

up: $(RUNTIME_STAMP)
	@$(COMPILE)
	@echo "Starting corral on https://127.0.0.1:7443: API server, scheduler, and this machine as a node"
	@echo "(process runtime; data, the cluster CA and the admin kubeconfig in ~/.local/share/corral)."
	@echo "In another terminal, the one line for corral and kubectl alike:"
	@echo "  export PATH=$(CURDIR)/$(BIN):\$$PATH KUBECONFIG=$${XDG_DATA_HOME:-$$HOME/.local/share}/corral/admin.kubeconfig"
	@echo "  corral apply -f examples/ && corral get pods -o wide && curl localhost:8080"
	@echo "Dashboard: https://127.0.0.1:7443/ui/ (log in by pasting the admin kubeconfig)."
	@echo "Stop with Ctrl-C."
	$(BIN)/corral server --local-agent

test: $(STAMP) system-deps
	@$(COMPILE)
	$(BIN)/ruff check --quiet --select F,E9 src tests bench
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/api_bench.py

# Mutation testing (not part of `make test`: on two cores the scheduler package alone takes ~15
# minutes, every module several hours). mutmut mutates
# the modules [tool.mutmut] in pyproject.toml names, runs the tests that reach each mutant, and
# keeps its results in mutants/ (a second run re-checks only what changed); the report prints the
# score per module and writes mutants/report.md. MUTMUT_ARGS adds to `mutmut run`, e.g. a name glob.
# A mutant that makes a test hang fails that test after 45 s (the slowest test takes ~25 s), not
# after the suite's 120 s (which the two whole-suite passes keep: tests/conftest.py); servers and agents
# the tests start import the mutated copy too. The results are also kept in git
# (tools/mutation_results.json, with mutmut's test statistics in tools/mutation_stats.json.xz, by
# tools/mutation_ledger.py): a fresh clone starts from them and
# checks only the mutants of functions changed since (FRESH=1: from nothing); after a run stopped
# by hand, `.venv/bin/python tools/mutation_ledger.py save` keeps what it checked. When tests changed,
# a second mutmut run checks again the survivors their new reach may kill (`mutation_ledger.py recheck`).
# Two mutants per core: the tests mostly wait on servers, agents and etcd (four at once on two cores
# checked about three times as many an hour as two).
mutation: $(STAMP) system-deps
	@if [ -z "$(FRESH)" ]; then $(BIN)/python tools/mutation_ledger.py restore; fi
	PYTEST_TIMEOUT=45 $(BIN)/mutmut run --max-children $$((2 * $$(nproc))) $(MUTMUT_ARGS); status=$$?; \
		if [ $$status = 0 ] && $(BIN)/python tools/mutation_ledger.py recheck; then \
			PYTEST_TIMEOUT=45 $(BIN)/mutmut run --max-children $$((2 * $$(nproc))) $(MUTMUT_ARGS); status=$$?; fi; \
		$(BIN)/python tools/mutation_ledger.py save; exit $$status
	$(BIN)/python tools/mutation_report.py

# Re-resolve the lock files from pyproject.toml (needs the package registry): everything, then the
# part of it that running corral needs.
lock:
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install -q --disable-pip-version-check -e '.[test]'
	.lockenv/bin/pip freeze --exclude-editable | grep -v '^corral' > requirements.lock
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install -q --disable-pip-version-check -c requirements.lock -e .
	.lockenv/bin/pip freeze --exclude-editable | grep -v '^corral' > requirements-runtime.lock
	rm -rf .lockenv

clean:
	rm -rf $(VENV) build src/*.egg-info
