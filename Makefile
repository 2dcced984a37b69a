# ghbuild developer entry points. Run as root on a Debian-like machine.
#   make test   - set up the venv and run the whole test suite
#   make demo   - set up and run the toolkit's main job locally
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test demo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "ghbuild needs Python >= 3.11"'
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

test: venv
	$(PY) -m pytest -q

demo: venv
	@bash bench/../.ci/demo.sh

bench: venv
	$(PY) bench/plan_startup.py

clean:
	rm -rf $(VENV) .ghbuild .pytest_cache .hypothesis
