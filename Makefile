# One virtualenv for everything; `make test` and `make demo` create or refresh it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LINT_PATHS := $(wildcard broker_image operator pipeline tests mqcluster_testing bench tools e2e chaos)
TYPED_PACKAGES := $(wildcard broker_image/mqcluster operator/mqcluster_operator pipeline/mqcluster_audit chaos \
                  mqcluster_testing)

.PHONY: setup test test-fast lint demo bench chaos clean images

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip setuptools wheel
	$(PY) -m pip install -q -e '.[operator,pipeline,dev]'
	touch $(STAMP)

setup: $(STAMP)

# -rsx: the log names every skipped or expected-to-fail test and why (the image, chaos and
# real-control-plane tests skip only where podman, ip netns or ../shared/kube are missing).
test: setup
	$(PY) -m pytest -q -rsx -p no:cacheprovider

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy $(TYPED_PACKAGES)
	$(VENV)/bin/lint-imports

demo: setup
	$(PY) -m mqcluster_operator.local.demo

bench: setup
	$(PY) -m pip install -q -e '.[operator,pipeline,dev,bench]'
	$(PY) -m bench

# Faults against real processes in network namespaces (root); one table at the end.
CHAOS_DURATION ?= 300
CHAOS_ARGS ?=
chaos: setup
	$(PY) -m chaos --duration $(CHAOS_DURATION) $(CHAOS_ARGS)

# Both images with podman from Debian bases made by mmdebstrap (no registry); sizes, the
# largest packages and each image's budget at the end (tools/images/build.py).
IMAGES_ARGS ?=
images:
	$(PYTHON) tools/images/build.py $(IMAGES_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
