# ClaimTrail — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Everything but the tests is type-checked: the pure core and the shells, dashboards and benchmarks around it.
TYPED := audit ingest dashboards benchmarks

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
# The image deploy/ runs; set IMAGE to your registry's name for it (deploy/README.md, step 1).
IMAGE ?= ghcr.io/claimtrail/claimtrail:$(VERSION)
CONTAINER ?= docker

.PHONY: install test lint typecheck unit demo bench image traces clean

install: $(STAMP) /usr/bin/chromium

# Re-run pip only when the dependency list changes; the stamp makes repeated installs instant.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The browser test drives Debian's chromium; a downloaded browser is never used.
/usr/bin/chromium:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

lint: install
	$(VENV)/bin/ruff check audit ingest dashboards tests benchmarks
	$(VENV)/bin/lint-imports --no-cache

typecheck: install
	$(VENV)/bin/mypy $(TYPED)

# One worker per core (pytest-xdist); --dist loadscope keeps each module's tests on one worker, so
# a module-scoped fixture (a simulated day, a filled store) is built once, not once per worker.
unit: install
	$(VENV)/bin/pytest -n auto --dist loadscope

test: lint typecheck unit

demo: install
	$(VENV)/bin/claimtrail demo $(if $(DEMO_CHECK),--check,)

# The public Alibaba GPU traces for `simulate --trace`, verified by sha256, into the folder the
# command chooses itself, as the simulator looks for them (CLAIMTRAIL_TRACE_DIR, else
# $CLAIMTRAIL_DATA_DIR/traces, else .claimtrail/traces); TRACE_DIR=… to choose another.
traces: install
	$(VENV)/bin/claimtrail traces fetch$(if $(TRACE_DIR), --dir $(TRACE_DIR))

bench: install
	$(PY) -m benchmarks.run --json benchmarks/results.json $(BENCH_ARGS)

image:
	$(CONTAINER) build --tag $(IMAGE) .

clean:
	rm -rf .claimtrail .pytest_cache .mypy_cache .ruff_cache
