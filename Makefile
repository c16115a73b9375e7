PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint pytest bench clean install uninstall tools docs

# The stamp files re-install only when the packaging metadata changes.
# The editable install puts the checkout on sys.path (setuptools' compat
# mode) instead of installing an import hook: the hook costs every Python
# start in the venv about 20 ms, a third of what a CLI command may take.
EDITABLE := --config-settings editable_mode=compat
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e . $(EDITABLE)
	touch $@

$(VENV)/.installed-test: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]' $(EDITABLE)
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/enact daemon run

lint: $(VENV)/.installed-test
	$(BIN)/ruff check enact tests bench
	$(BIN)/mypy --strict enact

# The real model CLIs the runtime tests drive (pinned), in a git-ignored
# folder; npm keeps its cache in its default place (~/.npm), outside the
# checkout. The stamp names the versions, so a rerun does nothing and a
# changed pin reinstalls.
TOOLS := .tools
CODEX_VERSION := 0.169.0
CLAUDE_VERSION := 2.1.328
TOOLS_STAMP := $(TOOLS)/.installed-codex-$(CODEX_VERSION)-claude-$(CLAUDE_VERSION)
# (defined before the rules that name it: make reads a rule's prerequisites
# as it meets them)

# Four workers on two cores: most tests wait on daemons, subprocesses and
# sockets, and with two workers the cores sat a quarter idle. worksteal
# hands an idle worker the end of a busy one's queue (the last tests are
# short ones: tests/conftest.py orders the modules with long tests first).
PYTEST_WORKERS ?= 4
pytest: $(VENV)/.installed-test $(TOOLS_STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal

test: lint pytest

tools: $(TOOLS_STAMP)

$(TOOLS_STAMP):
	rm -f $(TOOLS)/.installed-*
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error \
		@openai/codex@$(CODEX_VERSION) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	touch $@

bench: $(VENV)/.installed-test
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(TOOLS) build *.egg-info

# `make install` puts enact where the systemd unit starts it
# (deploy/systemd/enact.service: %h/.local/bin/enact): a virtualenv of its own
# plus a symlink, so it needs neither pipx nor a pip that may write to the
# system's Python (Debian refuses that: externally-managed-environment).
INSTALL_VENV ?= $(HOME)/.local/share/enact/venv
INSTALL_BIN ?= $(HOME)/.local/bin

install:
	$(PYTHON) -m venv --clear "$(INSTALL_VENV)"
	"$(INSTALL_VENV)/bin/python" -m pip install --quiet .
	mkdir -p "$(INSTALL_BIN)"
	ln -sfn "$(INSTALL_VENV)/bin/enact" "$(INSTALL_BIN)/enact"
	@echo "enact installed: $(INSTALL_BIN)/enact -> $(INSTALL_VENV)/bin/enact"

uninstall:
	rm -f "$(INSTALL_BIN)/enact"
	rm -rf "$(INSTALL_VENV)"

# The configuration and CLI references (docs/reference/), written from the
# code; tests/test_reference.py fails when the committed pages are stale.
docs: $(VENV)/.installed
	$(BIN)/python -m enact.reference
