PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint pytest bench clean

# The stamp files re-install only when the packaging metadata changes.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/enact daemon run

lint: $(VENV)/.installed-test
	$(BIN)/ruff check enact tests bench
	$(BIN)/mypy --strict enact

pytest: $(VENV)/.installed-test
	$(BIN)/pytest -q

test: lint pytest

bench: $(VENV)/.installed-test
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
