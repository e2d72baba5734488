# awm developer entry points. Everything installs from this repository's own files.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BFCL   := $(VENV)/.bfcl-installed
MCPU   := $(VENV)/.mcpu-installed
TRAIN  := $(VENV)/.trainers-installed

.PHONY: setup system bfcl mcpu trainers inspector tui test bench screenshots clean constraints

# the sandbox's system packages: bubblewrap (namespaces and the filesystem view) and libseccomp (the system-call
# filter). Installed when this runs as root on a Debian-like system; otherwise what is missing is said, and
# `awm doctor sandbox` shows what that costs (untrusted code is refused without bubblewrap unless
# --unsafe-no-sandbox is given)
system:
	@missing=""; command -v bwrap >/dev/null 2>&1 || missing="bubblewrap"; \
	 ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || missing="$$missing libseccomp2"; \
	 if [ -n "$$missing" ]; then \
	   if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	     echo "installing the sandbox's system packages:$$missing"; \
	     apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $$missing >/dev/null; }; \
	   else \
	     echo "awm: missing system packages:$$missing (install them, e.g. sudo apt-get install$$missing);" \
	          "without bubblewrap untrusted code is refused unless --unsafe-no-sandbox is given (see awm doctor sandbox)"; \
	   fi; \
	 fi

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "awm needs Python 3.11+"'
	@$(MAKE) --no-print-directory system
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,ray,train]'
	touch $(STAMP)

setup: $(STAMP)

# BFCLv3 (awm bench bfcl): the bfcl-eval wheel WITHOUT its dependency list (provider SDKs, torch …), then the few
# packages its checkers, decoders and multi-turn backends import (pyproject's `bfcl` extra), all at the pins
$(BFCL): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt -e '.[dev,bfcl]'
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt --no-deps bfcl-eval
	$(BIN)/awm bench bfcl check
	touch $(BFCL)

bfcl: $(BFCL)

# MCP-Universe (awm bench mcp-universe): the mcpuniverse wheel WITHOUT its dependency list (agent SDKs, databases,
# Blender, Playwright, yfinance …), then the few packages its evaluator modules import (pyproject's `mcpu` extra);
# awm calls its evaluators with every live service replaced by a stand-in
$(MCPU): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt -e '.[dev,mcpu]'
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt --no-deps mcpuniverse
	$(BIN)/awm bench mcp-universe check
	touch $(MCPU)

mcpu: $(MCPU)

# the trainers the consumer tests run awm's data and adapters through, on CPU (pyproject's `trainers` extra: torch's
# CPU build, TRL, transformers, datasets), then the verl wheel WITHOUT its dependency list (vLLM, flash-attn, wandb …):
# its agent loop and dataset classes need only what that extra brings. Not part of `make setup` or `make tui`.
$(TRAIN): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt -e '.[dev,trainers]'
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -c constraints.txt --no-deps verl
	$(BIN)/python -c 'import trl, datasets, verl.experimental.agent_loop.agent_loop, verl.utils.dataset.multiturn_sft_dataset'
	touch $(TRAIN)

trainers: $(TRAIN)

# the official MCP Inspector CLI (npm, pinned in tools/inspector/package-lock.json) for tests/test_mcp_inspector.py;
# without npm the test skips with the reason
inspector:
	@if command -v npm >/dev/null 2>&1; then \
	   cd tools/inspector && { [ -x node_modules/.bin/mcp-inspector ] || npm ci --silent --no-audit --no-fund >/dev/null 2>&1 \
	     || echo "awm: could not install the MCP Inspector (npm ci in tools/inspector failed); its test skips"; }; \
	 else echo "awm: npm not found: the MCP Inspector check (tests/test_mcp_inspector.py) skips"; fi

tui: system $(STAMP)
	$(BIN)/awm-tui

test: system $(STAMP) $(BFCL) $(MCPU) $(TRAIN) inspector
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/runtime.py
	$(BIN)/python benchmarks/tui_catalog.py
	$(BIN)/python benchmarks/eval_throughput.py

screenshots: $(STAMP)
	$(BIN)/python assets/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache

# refresh constraints.txt (the tested versions every set-up installs) from the current .venv (torch's CPU build is
# pinned without its local label: `torch==X` installs the CPU wheel where one is on disk)
constraints: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^ruff==' | sed 's/^torch==\([^+]*\)+cpu$$/torch==\1/' > constraints.txt
