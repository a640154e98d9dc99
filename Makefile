# kimik3-lessons: `make lab` opens the lessons, `make test` checks every module and notebook.
# Both create .venv on first use and install everything into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs
# The course's translations (docs/translations.md), as tools/translations/__init__.py lists them (read
# when a target uses them); LANG=<one of them> on the command line picks an edition.
LANGUAGES = $(shell $(PYTHON) -c 'from tools.translations import LANGUAGES; print(*LANGUAGES)')
EDITION_LANG := $(if $(filter command line,$(origin LANG)),$(LANG))

# Without an NVIDIA GPU, pin the CPU build of PyTorch: a plain `torch` pulls a multi-GB CUDA build.
# Override for another machine, e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
# On a GPU machine a CUDA build newer than the driver reports no GPU: `make test-gpu` says which to pass.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAS_GPU),yes)
TORCH_SPEC ?= torch
else
TORCH_SPEC ?= torch==2.13.0
endif

# The exact versions `make test` runs with, every package but torch (whose build the machine decides,
# TORCH_SPEC): constraints.txt, applied to every install into .venv. `make constraints` rewrites it from
# .venv (after `pip install --upgrade` of what should move; then run `make test`). On a GPU machine the
# CUDA build of torch brings its own triton and dependencies: there the constraints are applied to the
# rest, without the lines of what torch installed.
# pyproject.toml bounds torch, triton and numpy to what is tested: `make test-colab` is the floor.
CONSTRAINTS := constraints.txt
VENV_CONSTRAINTS := $(VENV)/constraints.txt

# pytest workers for the notebooks (each notebook runs whole in one worker).
WORKERS ?= 2
# What `make test` writes goes to a scratch folder, so a test run leaves the tree clean: the figures, and
# the student edition whose notebooks it runs. One OpenMP thread per worker: two workers with two threads
# each oversubscribe a 2-core machine, and the lessons' many small tensor ops then run up to 20x slower.
# KIMIK3_REHEARSE=1: without a GPU the `%%needs gpu` cells run anyway, at small sizes, our kernels
# interpreted and flash-linear-attention's kernels replaced by stand-ins (kimik3_lessons/fla_stand_in.py).
SCRATCH := $${TMPDIR:-/tmp}/kimik3-lessons-test
TEST_ENV := HF_HUB_OFFLINE=1 KIMIK3_FIGURES="$(SCRATCH)/figures" MPLBACKEND=Agg OMP_NUM_THREADS=1 KIMIK3_REHEARSE=1

.PHONY: lab test notebooks bench lint clean student times

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
ifeq ($(HAS_GPU),yes)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	installed="$$($(BIN)/python -m pip freeze | sed -E 's/[=@ ].*//' | paste -sd'|')"; \
		grep -v -i -E "^($$installed)==" $(CONSTRAINTS) > $(VENV_CONSTRAINTS)
else
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) $(TORCH_SPEC)
	cp $(CONSTRAINTS) $(VENV_CONSTRAINTS)
endif
	$(BIN)/python -m pip install --quiet -c $(VENV_CONSTRAINTS) -e ".[dev]"
	touch $@

.PHONY: constraints
constraints: $(STAMP)
	{ echo "# The exact versions \`make test\` runs with (all but torch: TORCH_SPEC in the Makefile). Written by"; \
	  echo "# \`make constraints\` from .venv; \`make test-colab\` is the floor (Colab's triton and numpy)."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v -E '^(torch|nvidia-[a-z0-9-]+|kimik3-lessons)[=@ ]'; \
	} > $(CONSTRAINTS)

# `make lab LANG=zh_CN` (or de) opens that edition's notebooks instead.
# Jupyter refuses to run as root unless told; containers and course machines often are root.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	LC_ALL=C.UTF-8 $(BIN)/jupyter lab $(LAB_FLAGS) $(if $(EDITION_LANG),editions/$(EDITION_LANG)/notebooks/,notebooks/)

# In the course: the tests of the course's own making (they need solutions/ or the guide; the list is
# TEACHER_TESTS in tools/student_edition.py), then the student edition built into the scratch folder and
# its own `make test` run there, with this environment: every other unit test, then every lesson top to
# bottom (nbval) as a student meets it, importing the edition's copy of the package. Nothing runs twice.
# In the edition (no solutions/), `make test` is those two steps. Every cell must run, and every exercise
# check must say "not attempted yet" (conftest.py).
# In the course, the translations' in-step tests need Sphinx and MyST's parser (the docs extra).
test: $(STAMP) $(if $(wildcard solutions),$(DOCS_STAMP))
	rm -rf "$(SCRATCH)" && mkdir -p "$(SCRATCH)/figures"
ifneq ($(wildcard solutions),)
	$(TEST_ENV) $(BIN)/pytest -q -n $(WORKERS) --dist loadfile \
		$$($(BIN)/python -m tools.student_edition --teacher-tests)
	$(BIN)/python -m tools.student_edition "$(SCRATCH)/student"
	$(MAKE) -C "$(SCRATCH)/student" test STAMP= BIN="$(CURDIR)/$(BIN)" SCRATCH="$(SCRATCH)/edition"
else
	$(TEST_ENV) $(BIN)/pytest -q -n $(WORKERS) tests/
	PYTHONPATH="$(CURDIR)" $(TEST_ENV) $(BIN)/pytest -q -n $(WORKERS) --dist loadfile --nbval-lax \
		--nbval-current-env --nbval-cell-timeout=600 notebooks/
endif

# The course in a real browser (browser_tests/, which `make test` does not collect): JupyterLab on
# loopback in headless Chromium, every notebook Run All from the menu in a fresh kernel, then errors,
# failed checks, stderr, execution counts, widgets and sliders checked; negative controls prove each check
# can fail. Playwright drives Debian's chromium (installed here with apt when missing, with a font for
# Chinese; Playwright's own browser download is not used). Screenshots, figures, server logs and a timing report go to
# BROWSER_SCRATCH. NB_TIMEOUT is one notebook's time limit in seconds.
BROWSER_SCRATCH := $${TMPDIR:-/tmp}/kimik3-browser
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# Debian's chromium, and a font with Chinese glyphs for the Chinese edition (else its text shows as boxes).
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
BROWSER_INSTALL = { test -x /usr/bin/chromium && test -f $(CJK_FONT); } || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium fonts-wqy-microhei; }
NB_TIMEOUT ?= 300
# Two notebooks at a time (two pytest workers, each with its own JupyterLab and Chromium), longest first:
# on 2 cores a kernel and its browser leave room for another pair, and CI's time budget needs it.
BROWSER_WORKERS ?= 2
.PHONY: test-browser set-repo
test-browser: $(STAMP)
	$(BROWSER_INSTALL)
	rm -rf "$(BROWSER_SCRATCH)" && mkdir -p "$(BROWSER_SCRATCH)"
	KIMIK3_BROWSER_SCRATCH="$(BROWSER_SCRATCH)" NB_TIMEOUT=$(NB_TIMEOUT) $(BIN)/pytest -q -n $(BROWSER_WORKERS) \
		--dist load --maxschedchunk 1 browser_tests/

# The course as a website in build/site/: tools/site_pages.py writes the pages (from the committed,
# executed notebooks and the docs) into SITE_WORK, Sphinx + MyST-NB build them without running anything,
# with site/ as the configuration; -W: a warning (a broken link among them) fails the build. The docs extra
# is installed into .venv once, with its own stamp, so `make test` never pays for it.
# Each translation (LANGUAGES) is built from the same pages and locales/<lang>/ into build/site/<lang>/, its
# interface text from site/locales/<lang>/ (copies of both in SITE_WORK: Sphinx writes .mo files beside them).
# test-site serves the site on 127.0.0.1 and opens every page in headless Chromium (site_tests/);
# screenshots and a report go to SITE_SCRATCH.
SITE := build/site
SITE_WORK := build/site-work
SITE_SCRATCH := $${TMPDIR:-/tmp}/kimik3-site-test
# Two pytest workers, each with its own server and Chromium: 22 pages in three languages, the header worked
# at four widths, the controls.
SITE_WORKERS ?= 2
.PHONY: site test-site
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(VENV_CONSTRAINTS) -e ".[docs]"
	touch $@

site: $(DOCS_STAMP)
	$(BIN)/python -m tools.site_pages $(SITE_WORK)/src
	rm -rf $(SITE_WORK)/locales $(SITE_WORK)/site-locales && cp -r locales $(SITE_WORK)/locales
	cp -r site/locales $(SITE_WORK)/site-locales
	$(BIN)/python -m sphinx -b html -W --keep-going -q -c site -d $(SITE_WORK)/doctrees $(SITE_WORK)/src \
		$(SITE_WORK)/html
	for lang in $(LANGUAGES); do \
		KIMIK3_SITE_LANG=$$lang KIMIK3_LOCALES=$(CURDIR)/$(SITE_WORK)/locales \
			KIMIK3_SITE_LOCALES=$(CURDIR)/$(SITE_WORK)/site-locales $(BIN)/python -m sphinx -b html -W \
			--keep-going -q -c site -d $(SITE_WORK)/doctrees-$$lang $(SITE_WORK)/src $(SITE_WORK)/html/$$lang \
			|| exit 1; \
	done
	rm -rf $(SITE) && mv $(SITE_WORK)/html $(SITE)

test-site: site
	$(BROWSER_INSTALL)
	rm -rf "$(SITE_SCRATCH)" && mkdir -p "$(SITE_SCRATCH)"
	KIMIK3_SITE_SCRATCH="$(SITE_SCRATCH)" $(BIN)/pytest -q -n $(SITE_WORKERS) --dist load site_tests/

# Point the Colab badges, the Colab install lines and the README at another repository (a fork, a course
# copy): make set-repo REPO=owner/name. Without REPO, prints the current one and checks they all agree.
set-repo:
	$(PYTHON) -m tools.repo_url $(if $(REPO),--set $(REPO))

# The course a teacher hands out: outputs cleared, solutions left out (STUDENT=<folder>, default
# build/student: a new or empty folder, or one it wrote before; anything else is refused). REPO=owner/name:
# its badges and install lines open the class's repository; HINTS=0: graded work, no hint and no listing
# of an answer in it; LANG=zh_CN or de: its lessons in that language (the edition's).
STUDENT ?= build/student
HINTS ?= 1
student: $(if $(EDITION_LANG),$(DOCS_STAMP))
	$(if $(EDITION_LANG),LC_ALL=C.UTF-8 $(BIN)/python,$(PYTHON)) -m tools.student_edition $(STUDENT) \
		$(if $(REPO),--repo $(REPO)) --hints $(HINTS) $(if $(EDITION_LANG),--lang $(EDITION_LANG))

# The course as an nbgrader course directory (NBGRADER=<folder>, default build/nbgrader): every lesson's
# notebook with its solutions between nbgrader's markers, its checks as autograded cells (points =
# difficulty, partial credit) and its written question as a manually graded cell (docs/teaching.md,
# Grading). REPO=owner/name: badges and install lines open the class's repository; COURSE=<id>: the course
# id of a new nbgrader_config.py (an existing one is kept as it is); HINTS=1 keeps the hints.
NBGRADER ?= build/nbgrader
.PHONY: nbgrader
nbgrader:
	$(PYTHON) -m tools.nbgrader_export $(NBGRADER) --hints $(if $(filter command line,$(origin HINTS)),$(HINTS),0) \
		$(if $(REPO),--repo $(REPO)) $(if $(COURSE),--course $(COURSE))

# nbgrader on a real JupyterHub started on 127.0.0.1 (hub_tests/: its dummy authenticator, the local-process
# spawner, configurable-http-proxy from npm): release, fetch and submit by two students through the hub,
# collect, autograde, generate and return the feedback, fetched back. Installs JupyterHub into .venv and the
# proxy under HUB_NODE once. Not part of `make test` (README: its time).
HUB_NODE := $(CURDIR)/build/hub-node
HUB_SCRATCH := $${TMPDIR:-/tmp}/kimik3-hub
.PHONY: test-hub
test-hub: $(STAMP)
	$(BIN)/python -m pip install --quiet "jupyterhub>=5,<6"
	test -x "$(HUB_NODE)/node_modules/.bin/configurable-http-proxy" || \
		npm install --silent --prefix "$(HUB_NODE)" configurable-http-proxy@4
	rm -rf "$(HUB_SCRATCH)" && mkdir -p "$(HUB_SCRATCH)"
	PATH="$(HUB_NODE)/node_modules/.bin:$(CURDIR)/$(BIN):$$PATH" KIMIK3_HUB_SCRATCH="$(HUB_SCRATCH)" \
		$(BIN)/pytest -q -p no:xdist hub_tests/

# The course in other languages (docs/translations.md). The English pages are the one source; their
# prose is in gettext catalogs, locales/<lang>/LC_MESSAGES/<page>.po. `make catalogs` extracts the English
# messages (Sphinx's gettext builder) and merges them into every catalog (sphinx-intl): run it after
# changing English prose, then translate what it lists. `make edition LANG=zh_CN` (or de) writes
# editions/<lang>/: the lessons with their prose translated, code and outputs as committed, the README
# and the teaching guide. make lab LANG=zh_CN opens an edition. LANG is read only from the command line
# (the shell's LANG, a locale, is not a language of the course), and the tools run under the C.UTF-8 locale.
# `make lesson NOTEBOOKS=notebooks/05a_delta_rule.ipynb` is what a lesson's author runs after changing it:
# the lesson executed again (make notebooks), the catalogs updated, every edition written again, and the
# catalog messages now out of date listed (exit 1 while there are any: translate them, then
# `make edition LANG=...` for each language, or `make lesson` again).
.PHONY: catalogs edition lesson
TRANSLATIONS := LC_ALL=C.UTF-8 $(BIN)/python -m tools.translations
catalogs: $(DOCS_STAMP)
	$(TRANSLATIONS) catalogs

edition: $(DOCS_STAMP)
	$(if $(EDITION_LANG),,$(error say which edition: make edition LANG=$(firstword $(LANGUAGES)) (or another of $(LANGUAGES))))
	$(TRANSLATIONS) edition $(EDITION_LANG)

lesson: $(DOCS_STAMP)
	$(if $(filter command line,$(origin NOTEBOOKS)),,$(error say which lesson: make lesson NOTEBOOKS=notebooks/05a_delta_rule.ipynb))
	$(MAKE) notebooks NOTEBOOKS="$(NOTEBOOKS)"
	$(TRANSLATIONS) lesson $(NOTEBOOKS)

# CI's fast lane (.github/workflows/ci.yml, on every pull request, after `make lint`): every unit test of
# tests/, the course's own (teacher) tests included, and no notebook; `make test` runs the same tests and
# then every notebook. In the course it needs the docs extra (the translations' tests).
.PHONY: test-unit
test-unit: $(STAMP) $(if $(wildcard solutions),$(DOCS_STAMP))
	rm -rf "$(SCRATCH)" && mkdir -p "$(SCRATCH)/figures"
	$(TEST_ENV) $(BIN)/pytest -q -n $(WORKERS) --dist loadfile --durations=15 tests/

# Run every notebook once, timed, and write the table of docs/teaching.md (run it on an idle machine).
times: $(STAMP)
	$(BIN)/python -m tools.notebook_times

# Execute notebooks in place (outputs kept for readers on GitHub) and refresh figures/.
# NOTEBOOKS=notebooks/05*.ipynb runs some; ONLINE=1 lets the `%%needs internet` cells download.
NOTEBOOKS ?= notebooks/*.ipynb
ONLINE ?=
notebooks: $(STAMP)
	$(if $(ONLINE),,HF_HUB_OFFLINE=1) KIMIK3_FIGURES="$(CURDIR)/figures" \
		$(BIN)/python -m kimik3_lessons run-notebooks $(NOTEBOOKS)

# Every script in benchmarks/ but the MQAR sweep. The six timing scripts took 4 minutes on a quiet 2-core
# CPU, 30 under load (benchmarks/README.md); compile_kernels.py about one more. Each exits 1, with a
# `FAIL:` line per failure, when a required ratio or agreement fails; all run, and bench fails at the end
# if any failed. mqar_sweep.py trains models for hours (lesson 12 prints how many): `make sweep` runs it.
bench: $(STAMP)
	status=0; for script in benchmarks/*.py; do \
		[ "$$script" = benchmarks/mqar_sweep.py ] && continue; \
		$(BIN)/python $$script || status=1; \
	done; exit $$status

# The MQAR sweep lesson 12 plots: SWEEP_WORKERS runs at a time, one thread each (one by default, which
# leaves a 2-core machine usable; `make sweep SWEEP_WORKERS=2` on two idle cores; lesson 12 prints what
# it cost). Resumable: one file per run in benchmarks/results/mqar_sweep/, a run whose file exists is
# skipped; the summary is benchmarks/results/mqar_sweep_summary.json, assembled after every run.
SWEEP_WORKERS ?= 1
.PHONY: sweep
sweep: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/mqar_sweep.py --workers $(SWEEP_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check kimik3_lessons tests benchmarks notebooks solutions tools browser_tests conftest.py \
		site site_tests hub_tests

# Everything the targets above build in the checkout: both environments, build/ (site, student edition,
# nbgrader course), the caches; but never a folder under build/ that holds an nbgrader course (a gradebook,
# submissions, feedback, its configuration) or a git repository: those are kept, and named. Scratch
# folders under $TMPDIR are each target's own to clear.
clean:
	$(PYTHON) -m tools.nbgrader_export --clean build
	rm -rf $(VENV) $(COLAB) .pytest_cache .ruff_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The six lessons with `%%needs gpu` cells. `make test-colab` runs the first five whole with Colab's
# versions; lesson 13's kernels run there through the kernel tests (KERNEL_TESTS), its compile rows in the
# compile tables (CI's time budget: the lesson itself runs in `make test` and the browser suite).
COLAB_LESSONS := notebooks/03_chunkwise.ipynb notebooks/05b_deltanet_chunked.ipynb \
	notebooks/06_gated_deltanet.ipynb notebooks/07a_kda.ipynb notebooks/09b_latent_experts.ipynb
GPU_LESSONS := $(COLAB_LESSONS) notebooks/13_backward.ipynb

# On a machine with an NVIDIA GPU (a fresh one: nothing but Python and a driver): installs .venv as `make
# lab` does (the dev extra: all that GPU_TESTS and the lessons import), checks that torch sees the GPU
# (a CUDA build newer than the driver does not: it names the TORCH_SPEC to pass), runs the unit tests of
# the package on CUDA (kernels compiled), warms flash-linear-attention's kernels (its autotuner compiles
# every config on a first call: the GPU cells' calls, run in parallel processes, one line each as it
# finishes; FLA and Triton keep the results in their disk caches), runs the six GPU lessons whole, one
# after another (their timings share the GPU with nothing), and prints one table of every GPU cell's forms,
# errors against float64 and times against FLA's kernels, written to benchmarks/results/gpu-<gpu name>.json
# (commit it). Without a GPU it says so in one line and succeeds. Planned to take under 10 minutes on one
# H100 with its host's CPUs (the warm-up: about 5 of them); not yet timed on one.
GPU_SCRATCH := $${TMPDIR:-/tmp}/kimik3-lessons-gpu
GPU_TESTS := tests/test_mixers.py tests/test_moe.py tests/test_linear_attention.py tests/test_deltanet.py \
	tests/test_gated_deltanet.py tests/test_kda.py tests/test_kimi_linear.py tests/test_mla.py tests/test_gpt2.py \
	tests/test_attnres.py tests/test_lab.py tests/test_gpu_rehearsal.py tests/test_kernel_style.py \
	tests/test_backward.py
.PHONY: test-gpu test-colab
test-gpu:
ifneq ($(HAS_GPU),yes)
	@echo "make test-gpu: no NVIDIA GPU on this machine (nvidia-smi finds none), nothing to verify"
else
	$(MAKE) $(STAMP)
	$(BIN)/python -c 'from kimik3_lessons import gpu_bench; gpu_bench.check_cuda()'
	rm -rf "$(GPU_SCRATCH)" && mkdir -p "$(GPU_SCRATCH)/figures" "$(GPU_SCRATCH)/notebooks"
	HF_HUB_OFFLINE=1 KIMIK3_FIGURES="$(GPU_SCRATCH)/figures" MPLBACKEND=Agg $(BIN)/pytest -q -n $(WORKERS) \
		$(GPU_TESTS)
	$(BIN)/python -c 'from kimik3_lessons import gpu_bench; gpu_bench.warm_fla()'
	cp conftest.py "$(GPU_SCRATCH)/" && cp $(GPU_LESSONS) "$(GPU_SCRATCH)/notebooks/"
	$(BIN)/jupyter nbconvert --log-level=WARN --clear-output --inplace "$(GPU_SCRATCH)"/notebooks/*.ipynb
	cd "$(GPU_SCRATCH)" && HF_HUB_OFFLINE=1 KIMIK3_FIGURES="$(GPU_SCRATCH)/figures" MPLBACKEND=Agg \
		KIMIK3_GPU_RESULTS="$(GPU_SCRATCH)/rows.jsonl" "$(CURDIR)/$(BIN)/pytest" -q -p no:xdist --nbval-lax \
		--nbval-current-env --nbval-cell-timeout=600 notebooks/
	$(BIN)/python -c 'from kimik3_lessons import gpu_bench; gpu_bench.write_table("$(GPU_SCRATCH)/rows.jsonl")'
endif

# Colab's versions on a CPU: a second environment, .venv-colab, with the triton of Colab's GPU runtime
# (COLAB_TRITON) and Colab's numpy (COLAB_NUMPY), and the course installed as Colab's first cell installs
# it: not editable, with [ref] (pip keeps the torch, triton and numpy it finds). Colab pairs triton 3.5 with
# torch 2.9 (COLAB_TORCH_VERSION); on PyPI torch 2.9 is a CUDA build only, about 7 GB with its nvidia
# wheels, past what CI's budget allows, so CI pairs Colab's triton with this machine's CPU torch (importing
# torch does not import triton); `make test-colab COLAB_TORCH="torch==2.9.1"` runs with Colab's own torch
# where disk and time allow. In it: the five GPU lessons of COLAB_LESSONS run whole with Colab's numpy (GPU cells rehearsed,
# so every kernel runs interpreted), the compile table of every kernel checked (`--check`) at head size
# 128 with the oldest triton the course supports (COLAB_OLDEST_TRITON) and at head sizes 64 and 128 with
# Colab's (the newest, .venv's, compiles head size 128 in `make test`: CI's time budget), then numpy
# upgraded to the newest, as a laptop's install gets it, and the kernel tests (once: CI's time budget). The tests and lessons run from a copy, so that they import the
# installed package. The environment is built once (like .venv); each run reinstalls the course and Colab's
# numpy in it.
# Tested: torch 2.13.0+cpu with triton 3.5.1 and numpy 2.0.2, then numpy 2.4.6; compile tables with triton
# 3.5.1 and 3.4.0. To follow Colab: read the versions a fresh Colab GPU runtime prints (`import torch,
# triton, numpy`), set COLAB_TRITON, COLAB_NUMPY and COLAB_TORCH_VERSION here and in README's Colab
# section, run `make test-colab`, and widen pyproject.toml's bounds if the new triton passes.
COLAB := $(CURDIR)/.venv-colab
COLAB_STAMP := $(COLAB)/.installed
COLAB_TRITON ?= 3.5.1
COLAB_NUMPY ?= 2.0.2
COLAB_TORCH_VERSION := 2.9
COLAB_TORCH ?= $(TORCH_SPEC)
COLAB_OLDEST_TRITON ?= 3.4.0
COLAB_SCRATCH := $${TMPDIR:-/tmp}/kimik3-lessons-colab
# The tests that run a Triton kernel (interpreted): what a triton or numpy release can break.
KERNEL_TESTS := tests/test_mixers.py tests/test_moe.py tests/test_backward.py -k "triton or situ or kernel"
COLAB_ENV := HF_HUB_OFFLINE=1 KIMIK3_FIGURES="$(COLAB_SCRATCH)/figures" MPLBACKEND=Agg OMP_NUM_THREADS=1 \
	KIMIK3_REHEARSE=1
COLAB_PYTEST := cd "$(COLAB_SCRATCH)" && $(COLAB_ENV) $(COLAB)/bin/python -m pytest -q -n $(WORKERS) \
	-p no:cacheprovider
# Followed by the head sizes to compile.
COLAB_COMPILE := cd "$(COLAB_SCRATCH)" && $(COLAB)/bin/python -m kimik3_lessons compile-kernels --check \
	--workers $(WORKERS) --head-dim
$(COLAB_STAMP): pyproject.toml
	rm -rf $(COLAB) && $(PYTHON) -m venv $(COLAB)
	$(COLAB)/bin/python -m pip install --quiet $(COLAB_TORCH) "triton==$(COLAB_TRITON)" "numpy==$(COLAB_NUMPY)"
	$(COLAB)/bin/python -m pip install --quiet ".[ref]" "pytest>=8,<10" "pytest-xdist>=3.5,<4" \
		"nbval>=0.11,<0.12" ipykernel
	touch $@
test-colab: $(COLAB_STAMP) $(STAMP)
	rm -rf "$(COLAB_SCRATCH)" && mkdir -p "$(COLAB_SCRATCH)/figures" "$(COLAB_SCRATCH)/src"
	cp -r kimik3_lessons pyproject.toml README.md "$(COLAB_SCRATCH)/src/"
	$(COLAB)/bin/python -m pip install --quiet "numpy==$(COLAB_NUMPY)" "triton==$(COLAB_OLDEST_TRITON)"
	$(COLAB)/bin/python -m pip install --quiet --no-deps --force-reinstall "$(COLAB_SCRATCH)/src"
	mkdir -p "$(COLAB_SCRATCH)/notebooks" "$(COLAB_SCRATCH)/docs" && cp -r tests conftest.py "$(COLAB_SCRATCH)/"
	cp docs/notebook_times.json "$(COLAB_SCRATCH)/docs/"              # conftest.py: the longest lessons first
	cp $(COLAB_LESSONS) "$(COLAB_SCRATCH)/notebooks/"
	$(BIN)/jupyter nbconvert --log-level=WARN --clear-output --inplace "$(COLAB_SCRATCH)"/notebooks/*.ipynb
	$(COLAB)/bin/python -c 'import triton; print("colab env: the oldest triton supported,", triton.__version__)'
	$(COLAB_COMPILE) 128
	$(COLAB)/bin/python -m pip install --quiet "triton==$(COLAB_TRITON)"
	cd "$(COLAB_SCRATCH)" && $(COLAB)/bin/python -c 'import kimik3_lessons, numpy, torch, triton; \
		assert "site-packages" in kimik3_lessons.__file__, kimik3_lessons.__file__; \
		print("colab env: torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__, \
		      "(Colab: torch $(COLAB_TORCH_VERSION))")'
	$(COLAB_COMPILE) 64 128
	$(COLAB_PYTEST) --dist loadfile --nbval-lax --nbval-current-env --nbval-cell-timeout=600 $(COLAB_LESSONS)
	$(COLAB)/bin/python -m pip install --quiet --upgrade numpy
	$(COLAB)/bin/python -c 'import numpy; print("colab env: newest numpy", numpy.__version__)'
	$(COLAB_PYTEST) $(KERNEL_TESTS)
