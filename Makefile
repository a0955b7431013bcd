# Set-up and jobs for a fresh machine; every target installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install browser demo test bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	# torch==2.13.0 pins the CPU build on disk; an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0 -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

## The main job: record the default matrix on the reference backend, diff and check the shipped goldens.
demo: install
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

## The tests (what CI runs).
test: install browser
	$(VENV)/bin/ruff check mla_golden tests benchmarks
	$(VENV)/bin/mypy mla_golden
	$(PY) -m pytest -q -rs -n 2 tests

## Benchmarks: ratios against baselines measured in the same run.
bench: install
	$(PY) -m pytest -q benchmarks --benchmark-only --benchmark-columns=min,median,mean,rounds
	$(PY) benchmarks/bench.py goldens
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_spy.py
	$(PY) benchmarks/bench_capture.py

clean:
	rm -rf $(VENV) .mla-golden-out
