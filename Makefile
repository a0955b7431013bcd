# Set-up and jobs for a fresh machine; every target installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
# --no-compile: byte-compiling all of torch at install took minutes; Python compiles what a run imports, once.
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar off --no-compile
# Bytecode for what a run imports, written even where PYTHONDONTWRITEBYTECODE is set (many CI images set it): without
# it every process compiles torch's start-up modules again (import torch 7 s instead of 3.5 s), and not all of torch.
WARM := env -u PYTHONDONTWRITEBYTECODE $(PY) -c 'import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]'
HASH := $(shell cksum pyproject.toml | cut -d' ' -f1)
# Two stamps: the main job's needs (torch + the package), and the test tools on top (make test, make bench).
STAMP := $(VENV)/.installed-$(HASH)
TEST_STAMP := $(VENV)/.installed-test-$(HASH)

.PHONY: install install-test browser demo test test-slow bench clean

$(STAMP): pyproject.toml
	@echo "make: creating $(VENV) with what the main job needs: torch 2.13.0 (CPU build) and mla-golden"
	python3 -m venv $(VENV)
	# torch==2.13.0 pins the CPU build on disk; an unpinned torch would pull a multi-GB CUDA build.
	$(PIP) torch==2.13.0 -e .
	$(WARM) torch numpy safetensors safetensors.torch deepdiff typer rich.console rich.table rich.progress platformdirs filelock
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m compileall -q mla_golden
	rm -f $(VENV)/.installed-* && touch $@
	@echo "make: $(VENV) is ready"

$(TEST_STAMP): $(STAMP)
	@echo "make: adding the test extra to $(VENV) (pytest, hypothesis, ray, matplotlib, mypy, ruff, build)"
	$(PIP) torch==2.13.0 -e '.[test]'
	$(WARM) pytest xdist hypothesis pytest_benchmark matplotlib.pyplot ray
	touch $@

install: $(STAMP)

install-test: $(TEST_STAMP)

## The main job: record the default matrix on the reference backend, diff and check the shipped goldens.
demo: install
	@echo "make: recording the default matrix, then diffing and checking the shipped goldens"
	rm -rf .mla-golden-out
	$(VENV)/bin/mla-golden record --backend reference --out .mla-golden-out
	$(VENV)/bin/mla-golden diff goldens --backend reference
	$(VENV)/bin/mla-golden diff .mla-golden-out --against goldens
	$(VENV)/bin/mla-golden check goldens

## A headless browser for the HTML layout tests: Debian's chromium, installed where missing when run as root (CI).
browser:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
	      || echo "warning: could not install chromium: the browser tests will skip (and fail under CI=true)"; \
	  else \
	    echo "note: no /usr/bin/chromium (install it: apt-get install chromium): the browser tests will skip (and fail under CI=true)"; \
	  fi; }

## The tests: lint, types and every test not marked slow (a few minutes on a fresh 2-core machine).
test: install-test browser
	$(VENV)/bin/ruff check mla_golden tests benchmarks
	$(VENV)/bin/mypy mla_golden tests
	$(PY) -m pytest -q -rs -n 2 -m "not slow" tests

## The end-to-end tests marked slow (subprocesses, signals, builds, the browser, whole doc pages, sweeps at their
## budget, fuzzing): CI runs them after make test, so the two together are the whole suite.
test-slow: install-test browser
	$(PY) -m pytest -q -rs -n 2 -m slow tests

## Benchmarks: ratios against baselines measured in the same run.
bench: install-test
	$(PY) -m pytest -q benchmarks --benchmark-only --benchmark-columns=min,median,mean,rounds
	$(PY) benchmarks/bench.py goldens
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_spy.py
	$(PY) benchmarks/bench_bounds.py
	$(PY) benchmarks/bench_big_golden.py
	$(PY) benchmarks/bench_planners.py
	$(PY) benchmarks/bench_capture.py
	$(PY) benchmarks/bench_bisect.py

clean:
	rm -rf $(VENV) .mla-golden-out
