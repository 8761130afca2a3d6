# Set-up and entry points. `make test` and `make reproduce` each create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: test reproduce lint docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned to the CPU build, so no dependency can pull the CUDA build.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(ARGS)

$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/pip install -q -c constraints.txt -e '.[docs]'
	touch $@

# the reference site (README, DESIGN.md, the reproduction notes, the API from the docstrings) in site/; any
# warning is an error
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks examples

reproduce: $(VENV)/.installed
	$(BIN)/repdyn reproduce --jobs 2 $(ARGS)

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) repdyn-out site
