# gpufleet: two commands on a fresh machine.
#   make demo   opens the console on the embedded simulated fleet (make demo ARGS="--base-port 31000")
#   make test   runs every test (lint, types, unit, Pilot, snapshot, tmux and browser end-to-end)
# Both bootstrap .venv from nothing and install system tools (tmux; for make test also chromium)
# when missing; a second run is quick.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# SGLang itself, every release gpufleet knows (0.5.17 to 0.5.23: their wheels as PyPI serves
# them, ~200 MB, imported in place, never by the app, plus a few packages in deps/): the tests
# hold each shipped flag table (tui/sglang/flagtable/) to its release's real parser.
SGLANG := $(VENV)/sglang-reference/.all-releases

.PHONY: demo test test-under-load check bench tools browser venv clean

venv: $(STAMP) $(SGLANG)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

$(SGLANG): $(STAMP) tui/sglang/flagtable/reference.py
	$(BIN)/python -m tui.sglang.flagtable.generate --install --all
	@touch $(SGLANG)

# tmux drives the console in the end-to-end tests; Debian's prometheus is the real Prometheus
# the many-node tests scrape the agents with (its service is not started: tests run their own);
# OpenSSH's server and client carry `gpufleet agent start` in its tests (an sshd of their own on
# a loopback port, never the system's).
tools:
	@command -v tmux >/dev/null 2>&1 || { \
	  echo "installing tmux"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq tmux >/dev/null; }
	@command -v prometheus >/dev/null 2>&1 || { \
	  echo "installing prometheus"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    prometheus >/dev/null; }
	@{ command -v ssh >/dev/null 2>&1 && test -x /usr/sbin/sshd; } || { \
	  echo "installing openssh-server openssh-client"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    openssh-server openssh-client >/dev/null; }

# Debian's chromium for the browser end-to-end test of `gpufleet serve` (Playwright drives the
# system browser; `playwright install` is never run). Only `make test` needs it, not the demo.
browser:
	@test -x /usr/bin/chromium || { \
	  echo "installing chromium"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# ARGS: options of gpufleet demo (--base-port, --gpus, --speed, --profile, --no-pipeline, ...)
ARGS ?=

demo: $(STAMP) tools
	$(BIN)/gpufleet demo $(ARGS)

# tools/doclinks.py: every relative link and #anchor of README.md and docs/*.md resolves.
check: $(STAMP)
	$(BIN)/ruff check tui tests bench tools
	$(BIN)/ruff format --check tui tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/doclinks.py README.md docs

# Three test files at a time on two cores: the suite waits on real servers, not the CPU (twelve of
# the slowest files: 341 s with -n 2, 236 s with -n 3, the same 600 worker-seconds; docs/development.md).
test: $(STAMP) $(SGLANG) tools browser check
	$(BIN)/python -m pytest -q -n 3 --dist loadfile -m 'not serial' --durations=15
	$(BIN)/python -m pytest -q -m serial --durations=5

# make test with every core kept busy by bounded burners (tools/under_load.py): the operator's
# machine always is, and the suite must pass there.
test-under-load: $(STAMP)
	$(BIN)/python tools/under_load.py -- $(MAKE) test

bench: $(STAMP) tools
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
