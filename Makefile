# Two commands for learners (`make lab`, `make test`), `make check` and a few more for maintainers.
# Everything runs in .venv, created on first use from pyproject.toml's pins.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab reset test check axe labextension test-accuracy-settings test-soak test-graded test-install test-hub hub test-runtime-only test-compile lint format notebooks bench clean bench-latency bench-memory bench-hub gpu-check gpu-wheels model

# The environment, made and kept up to date by the course's own Python code (course/), the
# same code as the make-free commands (python -m course lab, test, check: see the README).
$(STAMP): pyproject.toml lib/pyproject.toml constraints.txt
	$(PYTHON) -m course install

# JupyterLab on the learner's own copies of the notebooks (my-notebooks/, made on first
# start; course updates offered beside them), on localhost only, with token authentication
# kept (course/lab.py is the one place the command lives; the tests start it too).
lab:
	$(PYTHON) -m course lab

# The course's version of one notebook back in my-notebooks/ (yours is moved to
# my-notebooks/old-copies/, nothing is deleted): make reset NB=01
reset:
	@test -n "$(NB)" || { echo "usage: make reset NB=01 (a notebook's number or name)" >&2; exit 2; }
	$(PYTHON) -m course reset "$(NB)"

# Slider latency in a real browser and in the kernel (p50/p95 per slider, and where each
# move's time goes: to the kernel, in it, to the page, to the screen); writes
# benchmarks/results/latency-<machine>.json (one per processor model: <machine> defaults
# to it, e.g. amd-epyc-2cpu) with the CPU model and the machine's load.
# Needs Debian's chromium. Exit status 3: measured, but the machine was busy (it says why).
bench-latency: $(STAMP)
	$(BIN)/python benchmarks/latency.py

# Memory per learner (kernel and server PSS after Run All and slider moves, alone and three
# learners at once for 00-02) in a real browser; adds a run to
# benchmarks/results/learner-memory-<machine>.json (MEMORY_ARGS: e.g. --label after).
bench-memory: $(STAMP)
	$(BIN)/python benchmarks/learner_memory.py $(MEMORY_ARGS)

# A class on the hub (as root): N = 1, 5, 10, 20, 30 learners, each in their own browser
# context, run 01 and move a slider every 2 s for 3 minutes; slider latency p50/p95, memory
# per learner, CPU, kernels lost and errors, and a run with one learner's kernel killed;
# writes benchmarks/results/hub-<machine>.json (HUB_LOAD_ARGS: e.g. --learners 5 10).
# About 45 minutes on the 2-core machine.
bench-hub: $(STAMP)
	$(PYTHON) -m course hub install
	$(BIN)/python benchmarks/hub_load.py $(or $(HUB_LOAD_ARGS),--kill 10)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# What a learner runs, in a few minutes: ruff, then the library's, the lessons' and the
# explorers' tests and one nbval pass over every notebook, on two workers (--dist loadfile
# keeps each file's tests on one worker in order, as nbval needs for a notebook's cells), the
# tests marked slow left to make check; in course/__main__.py like the make-free
# `python -m course test`. PYTEST_ARGS replaces the pytest arguments.
export PYTEST_ARGS
test:
	$(PYTHON) -m course test

# axe-core for tests/browser/test_accessibility.py, at its pin (.ci/run does the same)
axe:
	npm ci --prefix labdriver/axe --no-audit --no-fund

# The course's JupyterLab extension rebuilt from jupyter/a11y-extension (then commit
# jupyter/labextensions); needs node. Learners need none: the build is committed.
labextension: $(STAMP)
	cd jupyter/a11y-extension && npm ci --no-audit --no-fund && PATH="$(CURDIR)/$(BIN):$$PATH" npm run build
# Everything CI runs: ruff and every test (the browser tests in four front ends, the Triton
# front ends, the notebooks under other numerical settings, the project's own checks:
# `python -m course check`), then each step below. The hub's needs root.
check: $(STAMP)
	$(PYTHON) -m course check
	$(MAKE) test-accuracy-settings test-graded test-install test-compile test-soak test-hub

# The library's float32 accuracy tests (FlashAttention's 2x rule, the fused tiles' merge) under
# other numerical settings, as tests/notebooks/test_portable_outputs.py does for the notebooks:
# MKL's conservative path with torch's kernels without AVX2, then MKL's AVX2 path with torch's
# AVX2 kernels on one thread (another CPU's code paths and order of sums); CI runs it.
ACCURACY_TESTS := lib/tests/test_fused_tiles.py lib/tests/test_property_2x.py \
	lib/tests/test_wide_scores.py lib/tests/test_flash_autograd.py \
	lib/tests/test_broadcast_gradients.py
test-accuracy-settings: $(STAMP)
	MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default \
		$(BIN)/python -m pytest -p no:cacheprovider -o addopts= -q $(ACCURACY_TESTS)
	MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=1 \
		$(BIN)/python -m pytest -p no:cacheprovider -o addopts= -q $(ACCURACY_TESTS)

# Repeated whole-notebook runs in a real browser, every notebook with an explorer, with a
# second learner's lab loading the machine (tests/browser/test_no_blank_explorer.py: about
# 6 minutes on an otherwise idle 2-core machine, 8-9 with other work); CI runs them after
# `make test`.
test-soak: $(STAMP)
	$(BIN)/python -m pytest -m soak tests/browser

# nbval on every notebook in an environment of the course's runtime requirements alone
# (the library's and the course's, at constraints.txt's pins) and nbval: no test extra, no
# lab extension, no JupyterLab; a scratch venv under $(RUNTIME_VENV), made anew (about 2
# minutes, then the notebooks); CI runs it.
RUNTIME_VENV ?= /tmp/attention-course-runtime
test-runtime-only:
	rm -rf $(RUNTIME_VENV)
	$(PYTHON) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/python -m pip install --quiet -c constraints.txt ./lib . nbval
	rm -rf build lib/build  # setuptools' builds of the installs above
	cd notebooks && $(RUNTIME_VENV)/bin/python -m pytest -p no:cacheprovider -o addopts= -c /dev/null \
		--rootdir=. --nbval --nbval-current-env --nbval-sanitize-with sanitize.cfg -q .

# nbgrader's real autograde on submissions of the graded edition (teachers/graded): the
# course's solutions, an untouched release, wrong answers, a non-notebook, moved cells
# (tests/teachers/test_graded.py -m grading: about 100 s); CI runs it.
test-graded: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -o addopts= -m grading tests/teachers

# Every test that installs a fresh environment (minutes of pip each): the runtime-only nbval
# above, Binder's own steps in a fresh venv (tests/project/test_binder.py), the library alone
# from its wheel, and the explorers on Colab's widget versions (ipywidgets 7.7.1 in Notebook
# 6.5, in Chromium: tests/browser/test_colab_widgets.py); CI runs it.
test-install: test-runtime-only $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -m install tests/project tests/browser/test_colab_widgets.py

# A class's JupyterHub (teachers/hub/, python -m course hub: see docs/teachers.md), tested
# as root with real system learners in Chromium: login, 01 run and moved, one learner kept
# from another's server, files and API, course updates by nbgitpuller with the learner's
# work kept; faults: a learner's kernel killed, a learner over their
# memory limit (their cgroup's), the others untouched. The first run builds
# /opt/attention-course (minutes of pip and npm, then cached by a stamp keyed on the pins);
# CI runs it.
test-hub: $(STAMP)
	$(PYTHON) -m course hub install
	$(BIN)/python -m pytest -p no:cacheprovider -m hub tests/browser/test_hub.py tests/browser/test_hub_faults.py -v

# The hub for a class, on 127.0.0.1:8000 (python -m course hub start --help for more).
hub:
	$(PYTHON) -m course hub start

# The Triton compiles make test leaves to the front end: widths 16 and 32 whole to a cubin
# for sm_80 and sm_90, width 16 for sm_75, sm_86 and sm_89, each against its shared memory
# (lib/tests/kernels/test_triton_compile.py --narrow); CI runs it.
test-compile: $(STAMP)
	TRITON_INTERPRET=0 $(BIN)/python lib/tests/kernels/test_triton_compile.py --narrow --check > /dev/null

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Every attention path side by side; results land in benchmarks/results/<machine>/.
# BENCH_ARGS="--quick" for a short try.
bench: $(STAMP)
	$(BIN)/python -m attention_course.bench $(BENCH_ARGS)

# On a machine with an NVIDIA GPU, with that machine's own Python (torch, triton, numpy,
# matplotlib, psutil, tqdm; no .venv, no network): the Triton kernels' correctness, then
# the GPU benchmark, into benchmarks/results/gpu-<device>/. GPU_CHECK_ARGS=--quick for a
# shorter sweep. Packages it lacks come from .whl/ (make gpu-wheels, run where pip works).
GPU_PYTHON ?= python3
gpu-check:
	$(GPU_PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)

gpu-wheels: $(STAMP)
	$(BIN)/python scripts/gpu_check.py --fetch-wheels

# Train the small models the notebooks load (a few minutes on two cores) and write their
# weights and training report to attention_course/model/trained/, then draw the report
# (report.png) beside it (then commit them).
# MODEL_ARGS="--check" retrains into a temporary folder and compares with the committed report.
model: $(STAMP)
	$(BIN)/python -m attention_course.model.training --jobs 2 $(MODEL_ARGS)
	$(if $(findstring --check,$(MODEL_ARGS)),,$(BIN)/python -m attention_course.lessons.figures)

# Re-execute every notebook in place, storing fresh outputs (then commit them).
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/[0-9]*.ipynb
	$(BIN)/python -m course.runtimes  # 00's sentence on how long each one took

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
