# awm developer entry points. Everything installs from this repository's own files.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BFCL   := $(VENV)/.bfcl-installed

.PHONY: setup bfcl tui test bench screenshots clean constraints

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "awm needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,ray,train]'
	touch $(STAMP)

setup: $(STAMP)

# BFCLv3 (awm bench bfcl): the bfcl-eval wheel WITHOUT its dependency list (provider SDKs, torch …), then the few
# packages its checkers, decoders and multi-turn backends import (pyproject's `bfcl` extra), all at the pins
$(BFCL): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bfcl]'
	$(BIN)/python -m pip install --quiet -c constraints.txt --no-deps bfcl-eval
	$(BIN)/awm bench bfcl check
	touch $(BFCL)

bfcl: $(BFCL)

tui: $(STAMP)
	$(BIN)/awm-tui

test: $(STAMP) $(BFCL)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/runtime.py
	$(BIN)/python benchmarks/tui_catalog.py
	$(BIN)/python benchmarks/eval_throughput.py

screenshots: $(STAMP)
	$(BIN)/python assets/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache

# refresh constraints.txt (the tested versions every set-up installs) from the current .venv
constraints: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^ruff==' > constraints.txt
