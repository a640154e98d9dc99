# kimik3-lessons: `make lab` opens the lessons, `make test` checks every module and notebook.
# Both create .venv on first use and install everything into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Without an NVIDIA GPU, pin the CPU build of PyTorch: a plain `torch` pulls a multi-GB CUDA build.
# Override for another machine, e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAS_GPU),yes)
TORCH_SPEC ?= torch
else
TORCH_SPEC ?= torch==2.13.0
endif

# pytest workers for the notebooks (each notebook runs whole in one worker).
WORKERS ?= 2
# What `make test` writes goes to a scratch folder, so a test run leaves the tree clean: the figures, and
# the student edition whose notebooks it runs. One OpenMP thread per worker: two workers with two threads
# each oversubscribe a 2-core machine, and the lessons' many small tensor ops then run up to 20x slower.
SCRATCH := $${TMPDIR:-/tmp}/kimik3-lessons-test
TEST_ENV := HF_HUB_OFFLINE=1 KIMIK3_FIGURES="$(SCRATCH)/figures" MPLBACKEND=Agg OMP_NUM_THREADS=1

.PHONY: lab test notebooks bench lint clean student times

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# Jupyter refuses to run as root unless told; containers and course machines often are root.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	$(BIN)/jupyter lab $(LAB_FLAGS) notebooks/

# The unit tests, then every lesson run top to bottom (nbval) as a student meets it: in the student edition,
# whose notebooks are the course's own code with the outputs cleared and no solutions anywhere
# (tests/test_student_edition.py checks that), importing the edition's copy of the package. Every cell must
# run, and every exercise check must say "not attempted yet" (conftest.py).
test: $(STAMP)
	rm -rf "$(SCRATCH)" && mkdir -p "$(SCRATCH)/figures"
	$(TEST_ENV) $(BIN)/pytest -q -n $(WORKERS) tests/
	$(BIN)/python tools/student_edition.py "$(SCRATCH)/student"
	cd "$(SCRATCH)/student" && PYTHONPATH=. $(TEST_ENV) "$(CURDIR)/$(BIN)/pytest" -q -n $(WORKERS) \
		--dist loadfile --nbval-lax --nbval-current-env --nbval-cell-timeout=600 notebooks/

# The course in a real browser (browser_tests/, which `make test` does not collect): JupyterLab on
# loopback in headless Chromium, every notebook Run All from the menu in a fresh kernel, then errors,
# failed checks, stderr, execution counts, widgets and sliders checked; negative controls prove each check
# can fail. Playwright drives Debian's chromium (installed here with apt when missing; Playwright's own
# browser download is not used). Screenshots, figures, server logs and a timing report go to
# BROWSER_SCRATCH. NB_TIMEOUT is one notebook's time limit in seconds.
BROWSER_SCRATCH := $${TMPDIR:-/tmp}/kimik3-browser
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
NB_TIMEOUT ?= 300
.PHONY: test-browser set-repo
test-browser: $(STAMP)
	test -x /usr/bin/chromium || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	rm -rf "$(BROWSER_SCRATCH)" && mkdir -p "$(BROWSER_SCRATCH)"
	KIMIK3_BROWSER_SCRATCH="$(BROWSER_SCRATCH)" NB_TIMEOUT=$(NB_TIMEOUT) $(BIN)/pytest -q -p no:xdist browser_tests/

# Point the Colab badges, the Colab install lines and the README at another repository (a fork, a course
# copy): make set-repo REPO=owner/name. Without REPO, prints the current one and checks they all agree.
set-repo:
	$(PYTHON) tools/repo_url.py $(if $(REPO),--set $(REPO))

# The course a teacher hands out: outputs cleared, solutions left out (STUDENT=<folder>, default build/student).
STUDENT ?= build/student
student:
	$(PYTHON) tools/student_edition.py $(STUDENT)

# Run every notebook once, timed, and write the table of docs/teaching.md (run it on an idle machine).
times: $(STAMP)
	$(BIN)/python tools/notebook_times.py

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
# if any failed. mqar_sweep.py trains models for 1-2 hours: `make sweep` runs it.
bench: $(STAMP)
	status=0; for script in benchmarks/*.py; do \
		[ "$$script" = benchmarks/mqar_sweep.py ] && continue; \
		$(BIN)/python $$script || status=1; \
	done; exit $$status

# The MQAR sweep lesson 12 plots (1-2 hours on 2 CPU cores): rewrites benchmarks/results/mqar_sweep.json.
.PHONY: sweep
sweep: $(STAMP)
	$(BIN)/python benchmarks/mqar_sweep.py

lint: $(STAMP)
	$(BIN)/ruff check kimik3_lessons tests benchmarks notebooks solutions tools browser_tests conftest.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
