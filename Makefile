# ghbuild developer entry points. Run as root on a Debian-like machine.
#   make test   - set up the venv and run the whole test suite
#   make demo   - set up and run the toolkit's main job locally
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test demo bench clean infra-up infra-down infra-status

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

# For now the demo runs the planner: what a trusted push and a fork pull request would build.
DEMO_SHA = $(shell git rev-parse HEAD 2>/dev/null || echo 0123456789abcdef0123456789abcdef01234567)
demo: venv
	@echo "== push to the default branch of the canonical repository (trusted)"
	$(VENV)/bin/ghbuild plan --event push --repository ghbuild/ghbuild --ref main --default-branch main --sha $(DEMO_SHA)
	@echo
	@echo "== pull request #12 from a fork (no secrets: builds, writes only its own cache scope)"
	$(VENV)/bin/ghbuild plan --event pull_request --repository ghbuild/ghbuild --pr 12 --base main \
		--head-repo someone/ghbuild --head-ref fix/thing --default-branch main --sha $(DEMO_SHA)
	@echo
	@echo "== the build matrix for that push, as the reusable workflow consumes it"
	$(VENV)/bin/ghbuild matrix --event push --repository ghbuild/ghbuild --ref main --default-branch main --sha $(DEMO_SHA)

bench: venv
	$(PY) bench/plan_startup.py

# Local services (dockerd with BuildKit, staging and hub registries, S3, base images); idempotent.
infra-up: venv
	$(PY) -m ghbuild.infra up
infra-down:
	$(PYTHON) -m ghbuild.infra down
infra-status:
	$(PYTHON) -m ghbuild.infra status

clean:
	-$(PYTHON) -m ghbuild.infra down
	rm -rf $(VENV) .ghbuild .pytest_cache .hypothesis
