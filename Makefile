# Set-up and jobs for a fresh machine; every target installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install demo test bench clean

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

## The tests (what CI runs).
test: install
	$(VENV)/bin/ruff check mla_golden tests benchmarks
	$(VENV)/bin/mypy mla_golden
	$(PY) -m pytest -q -n 2 tests

## Benchmarks: ratios against baselines measured in the same run.
bench: install
	$(PY) -m pytest -q benchmarks --benchmark-only --benchmark-columns=min,median,mean,rounds
	$(PY) benchmarks/bench.py goldens
	$(PY) benchmarks/bench_sweep.py

clean:
	rm -rf $(VENV) .mla-golden-out
