# capmatrix developer tasks. `make run` and `make test` work on a fresh clone with only python3.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is optional for users; the tests exercise the engine edge with the CPU build, always pinned.
TORCH_PIN := torch==2.13.0

.PHONY: venv dev run test lint unit data docs bench fuzz exhaustive clean

# pip as the venv bundles it is used as is when it can install an editable hatchling project (21.3 and
# later): a requirement already met costs no download, where `--upgrade pip` fetched a pip on every
# fresh clone.
PIP_MIN := pip>=21.3

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q '$(PIP_MIN)'

$(VENV)/.installed: pyproject.toml tools/build_hook.py | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $@

# One pip run installs the package with the test and lint extras (one editable build, not two); it
# stands for `make venv`'s install too.
$(VENV)/.dev-installed: pyproject.toml tools/build_hook.py | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test,lint]' '$(TORCH_PIN)'
	touch $(VENV)/.installed $@

venv: $(VENV)/.installed

dev: $(VENV)/.dev-installed

# Validate the shipped matrix, then ask the seed question (examples/seed_question.py): both answers,
# the rules behind them, what would work, and where to go next. Fails only when something is wrong.
run: venv
	@$(VENV)/bin/capmatrix validate
	@$(PY) examples/seed_question.py

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# One pytest worker per core (JOBS=0 runs them in this process); pytest-cov combines the workers' coverage,
# and `coverage report` applies fail_under from pyproject.toml. The sources are byte-compiled first (under
# a second): the tests start many child processes, which otherwise each compile the package again where
# PYTHONDONTWRITEBYTECODE is set. Progress is a line per test file as it finishes (tests/file_progress.py);
# failures are printed in full at the end.
#
# What each target runs (docs/ci.md has the costs):
#   make test        lint (ruff, mypy), then every test: the data gate once with every oracle, the engines'
#                    records over every 8th question (tests/test_authoring_cli_main.py), the `sweep` tests
#                    over a spread of cells or over value classes, the Hypothesis tests at their profile's
#                    example count; the `exhaustive` tests are skipped, naming `make exhaustive`.
#   make data        the data gate (`capmatrix test`) over every question of every oracle; CI runs it after
#                    make test.
#   make exhaustive  the `sweep` tests over every cell and the `exhaustive` tests (CAPMATRIX_EXHAUSTIVE=1).
#   make fuzz        every fuzz target of tests/fuzz_main.py for FUZZ_EXAMPLES inputs each.
JOBS ?= auto
unit: dev
	$(PY) -m compileall -q capmatrix tests tools benchmarks examples >/dev/null
	$(PY) -m pytest -q -n $(JOBS) --cov --cov-report=
	$(PY) -m coverage report

# ruff first (a second); mypy (most of a minute of one core on a fresh clone, with no cache) runs beside
# the tests, its output held back and printed after theirs; the target fails when either fails.
MYPY_OUT := $(VENV)/mypy.out
test: dev
	$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy >$(MYPY_OUT) 2>&1 & mypy=$$!; \
	$(MAKE) --no-print-directory unit; tests=$$?; \
	wait $$mypy; typed=$$?; echo "mypy:"; cat $(MYPY_OUT); \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The data gate over everything: every expectation, legacy conditional, importer, evidence file, page and
# every question of every engine record (about a minute on two cores).
data: venv
	$(VENV)/bin/capmatrix test

# Regenerate docs/support-matrix.{md,html} and docs/findings.md from capabilities/ (tests fail while
# the committed Markdown pages are stale; the HTML page is a build output, ignored by git).
docs: venv
	$(PY) tools/render_matrix.py
	$(PY) tools/render_findings.py

# A long Hypothesis run over every fuzz target (FUZZ_EXAMPLES per target); prints the inputs tried.
FUZZ_EXAMPLES ?= 2000
fuzz: dev
	$(PY) tests/fuzz_main.py $(FUZZ_EXAMPLES)

# The full forms `make test` leaves out (tens of minutes): the C++ header's answer for every cell (over a
# billion; `make test` answers every combination of value classes), every cell of the engines' records
# through the adapters, the command line and the authoring recipe, every block of the exported tables,
# and the tests marked `exhaustive` (each pre-commit hook's own failures).
exhaustive: dev
	CAPMATRIX_EXHAUSTIVE=1 $(PY) -m pytest -q -n $(JOBS) -m "sweep or exhaustive"

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

# Benchmarks against the hardcoded conditional and two rules engines (zen-engine, cedarpy); about a
# quarter of an hour, plus the shape family of benchmarks/shapes.py (analyses that overrun are killed
# and reported); rewrites docs/benchmarks.md.
# BENCH_ARGS=--quick is a smoke run (smaller sizes; still rewrites the report unless --out - is given);
# each target not met gets its workload profiled at the end (--no-profiles skips that).
BENCH_ARGS ?=
bench: $(VENV)/.bench-installed
	$(PY) -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
