# nrtrewrite developer targets.  `make setup` then `make test` on a fresh machine.

PYTHON ?= python3
#: the oldest Python nrtrewrite runs on: pyproject.toml's requires-python, read from there
PYTHON_NEEDED := $(shell sed -n 's/^requires-python *= *">=\([0-9.]*\)".*/\1/p' pyproject.toml)
VENV ?= .venv
PY := $(VENV)/bin/python
NRTREWRITE := $(VENV)/bin/nrtrewrite
FIXTURE_SPECS := $(sort $(wildcard fixtures/*.yaml fixtures/bad/*.yaml))
#: the golden set: every fixture spec fixtures/<name>.yaml has its golden output
#: fixtures/golden/<name>.tar.gz, which the tests compare against (tests/conftest.py reads
#: this same set and the ranks below; README.md "Adding a fixture and its golden").
#: `make golden GOLDEN_FIXTURES=name` (or GOLDEN_FIXTURES=name in the environment)
#: regenerates one.
GOLDEN_FIXTURES ?= $(sort $(basename $(notdir $(wildcard fixtures/*.yaml))))
#: make golden: options given to every `python -m nrtrewrite.golden` (GOLDEN_FLAGS=
#: --no-memory-check skips the guard, which weighs node64's 5.0 GiB floor; the run itself
#: peaks at about 5 GiB, so with less available it is likely killed, not faster)
GOLDEN_FLAGS ?=
#: ranks kept in the golden output of the large fixtures (all ranks for the others)
GOLDEN_RANKS_node64 := --rank 0 --rank 1 --rank 63
GOLDEN_RANKS_two_node128 := --rank 0 --rank 63 --rank 64 --rank 127
FUZZ_SECONDS ?= 60
#: make soak: seconds of random models lowered and simulated
SOAK_SECONDS ?= 300
#: make soak: the run's seed (model i is SOAK_SEED * 10**6 + i); by default the clock's
#: seconds, read once, so each run draws other models; the recipe line shows it
ifeq ($(origin SOAK_SEED),undefined)
SOAK_SEED := $(shell date +%s)
endif
#: make test: pytest-xdist workers (auto = one per core; 0 = no workers, one process)
TEST_JOBS ?= auto
#: make profile: the model (a NEFF or a benchmark model's name), the rank, the tool
MODEL ?= large64
RANK ?= 0
TOOL ?=
#: the venv with nrtrewrite in it, made by `make setup` when it is missing or incomplete
#: (a venv made by hand, or with only atheris in it, would fail later with a traceback)
ENSURE_VENV = @$(PY) -c "import nrtrewrite, numpy" 2>/dev/null || $(MAKE) setup

.PHONY: setup python-check test fixtures golden bench profile fuzz soak clean help

## help: list the targets
help:
	@grep -E '^## ' Makefile | sed 's/^## //'

## setup: create .venv and install nrtrewrite with its test dependencies
setup: python-check
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'

#: setup's first step: $(PYTHON) is at least $(PYTHON_NEEDED), or one line saying which it is,
#: which is needed and how to give another (until 2026-12-07 pip's refusal, after the venv)
python-check:
	@$(PYTHON) -c 'import sys; need = tuple(int(x) for x in "$(PYTHON_NEEDED)".split(".")); \
	found = tuple(sys.version_info[:3]); \
	sys.exit(0 if found >= need else "make setup: $(PYTHON) is Python %d.%d.%d; nrtrewrite \
	needs Python $(PYTHON_NEEDED) or later: make setup PYTHON=/path/to/python3.12 (any \
	Python >= $(PYTHON_NEEDED))" % found)'

## test: run the whole test suite on every core (fails when no test runs; TEST_JOBS=0: serially)
test:
	@$(PY) -c "import nrtrewrite, numpy, pytest, xdist, hypothesis" 2>/dev/null || $(MAKE) setup
	$(PY) -m pytest -q -n $(TEST_JOBS)

## fixtures: rebuild every fixtures/<name>.neff from fixtures/<name>.yaml (byte-deterministic)
fixtures:
	$(ENSURE_VENV)
	@set -e; for spec in $(FIXTURE_SPECS); do \
		$(NRTREWRITE) assemble "$$spec" -o "$${spec%.yaml}.neff"; \
	done

## golden: regenerate fixtures/golden/<name>.tar.gz of every fixtures/<name>.yaml, the lowered
##         outputs the tests diff against (each simulated first; GOLDEN_FIXTURES=name: one);
##         minutes, and about 5 GiB of memory for node64 (its 5.0 GiB floor is near its
##         peak: GOLDEN_FLAGS=--no-memory-check skips the guard, little use with less)
golden:
	$(ENSURE_VENV)
	mkdir -p fixtures/golden
	$(foreach f,$(GOLDEN_FIXTURES),$(PY) -m nrtrewrite.golden fixtures/$(f).neff fixtures/golden/$(f).tar.gz $(GOLDEN_RANKS_$(f)) $(GOLDEN_FLAGS) &&) true

## bench: run the benchmarks (never part of make test)
bench:
	$(ENSURE_VENV)
	$(PY) benchmarks/run.py

## profile: where one rank's lowering spends its time (MODEL=large64 RANK=0, TOOL=pyinstrument,
##          cprofile or lines; benchmarks/profile_rank.py, which builds a missing benchmark
##          model; the tool installed if missing: pyinstrument, line_profiler for TOOL=lines,
##          nothing for TOOL=cprofile, the standard library's)
profile:
	$(ENSURE_VENV)
ifeq ($(TOOL),lines)
	@$(PY) -c "import line_profiler" 2>/dev/null || $(PY) -m pip install -q line_profiler \
		|| echo "profile: line_profiler could not be installed"
else ifeq ($(TOOL),cprofile)
else
	@$(PY) -c "import pyinstrument" 2>/dev/null || $(PY) -m pip install -q pyinstrument \
		|| echo "profile: pyinstrument could not be installed; using cProfile"
endif
	$(PY) benchmarks/profile_rank.py $(MODEL) --rank $(RANK) $(if $(TOOL),--tool $(TOOL))

## fuzz: coverage-guided fuzzing of the reader, trigger decoder and planner for FUZZ_SECONDS
##       (atheris, installed into the venv if missing; else a pure-Python mutation loop)
fuzz:
	$(ENSURE_VENV)
	@$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install -q atheris \
		|| echo "fuzz: atheris could not be installed; falling back to the pure-Python loop"
	$(PY) fuzz/fuzz_reader.py --seconds $(FUZZ_SECONDS)

## soak: random whole models lowered (random --algo, --host-cc) and simulated for
##       SOAK_SECONDS (default 300) from SOAK_SEED (default the clock's seconds: other
##       models each run; SOAK_SEED=S draws run S's again, the command shows it); failures
##       to fuzz/soak-failures.jsonl and make exits 2 (the script's status 1; RELIABILITY.md §5)
soak:
	$(ENSURE_VENV)
	$(PY) fuzz/soak_models.py --seconds $(SOAK_SECONDS)$(if $(SOAK_SEED), --seed $(SOAK_SEED))

## clean: remove build leftovers (build, dist, *.egg-info, .pytest_cache), lowered outputs
##        next to fixtures and the fuzzer's corpus (fuzz/corpus); never .venv
clean:
	rm -rf build dist *.egg-info fixtures/*.lowered .pytest_cache fuzz/corpus
