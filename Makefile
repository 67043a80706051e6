# Two commands: `make up` starts a local cluster, `make test` runs the whole suite.
# Both create .venv and install the locked dependencies when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install up test bench lock clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

install: $(STAMP)

up: $(STAMP)
	@echo "Starting corral on http://127.0.0.1:7443 (data in ~/.local/share/corral). In another terminal:"
	@echo "  export PATH=$(CURDIR)/$(BIN):\$$PATH"
	@echo "  corral apply -f examples/ && corral get nodes && corral get pods"
	@echo "Stop with Ctrl-C."
	$(BIN)/corral server

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/api_bench.py

# Re-resolve the lock file from pyproject.toml (needs the package registry).
lock:
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install -q --disable-pip-version-check -e '.[test]'
	.lockenv/bin/pip freeze --exclude-editable | grep -v '^corral' > requirements.lock
	rm -rf .lockenv

clean:
	rm -rf $(VENV) build src/*.egg-info
