# The README's commands: `make demo`, `make test`, `make lab` and `make docs`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TORCH_CPU := torch==2.13.0
DEMO_OUT ?= runs/demo
LAB_PORT ?= 8888

.PHONY: demo figures screenshots test check lab docs readme readme-check install lint sync-check nbtest pytest export clean-venv bench-gpu bench-venv wheelhouse

install: $(STAMP)

# Create .venv (seeing the system's packages when the system already has torch, e.g. a CUDA
# build on a GPU machine, so that one is kept), install the CPU torch wheel only where no torch
# is importable, then the kit and its dev tools.
$(STAMP): pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c "import torch" >/dev/null 2>&1; then $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else $(PYTHON) -m venv $(VENV); fi; fi
	@$(BIN)/python -c "import torch" >/dev/null 2>&1 || $(BIN)/python -m pip install -q $(TORCH_CPU)
	$(BIN)/python -m pip install -q -e ".[dev]"
	@# dev-only reference for the DALL-E parity test; --no-deps skips its torchvision pin (it imports only attr, requests, torch)
	$(BIN)/python -m pip install -q --no-deps dall-e==0.1
	@# MathJax's static files for the docs (see `docs`), here too so that tests/test_docs.py checks the formulas' files
	$(BIN)/python -m pip install -q --no-deps "jupyter-server-mathjax>=0.2.6,<0.3" \
	|| echo "install: could not install jupyter-server-mathjax; the docs' formulas will show as TeX"
	@touch $(STAMP)

# The main job; its store, model, summary and figures go under runs/demo/ (git ignores runs/).
demo: $(STAMP)
	$(BIN)/vimpac-showcase --out $(DEMO_OUT)

# The same job, writing the README's figures (images/reconstruction.png, images/training_curves.png): tracked files,
# changed only by this explicit target.
figures: $(STAMP)
	$(BIN)/vimpac-showcase --out $(DEMO_OUT) --images images

# JupyterLab on the loopback interface in nbs/ (the lab extra is installed here only, so `make test` stays as fast).
# The README's screenshots (images/demo.png, images/explorer.png, images/docs.png), taken by the browser tests in
# Debian's headless chromium: tracked files, changed only by this explicit target (`make test` saves them elsewhere).
screenshots: $(STAMP)
	VIMPAC_SCREENSHOTS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_demo.py::test_browser_page \
		tests/test_explorer.py::test_explorer_cell_in_jupyterlab tests/test_docs.py::test_browser_formulas_load_every_file_and_search_finds

lab: $(STAMP)
	@$(BIN)/python -c "import jupyterlab, ipywidgets" >/dev/null 2>&1 || $(BIN)/python -m pip install -q -e ".[lab]"
	@# --allow-root only where we are root (a container), which JupyterLab refuses otherwise
	cd nbs && ../$(BIN)/jupyter lab --ip 127.0.0.1 --port $(LAB_PORT) --no-browser $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# The documentation site in _docs/ (tools/build_docs.py): nbdev's doc processing of nbs/, rendered by Quarto where
# `quarto` is installed (the docs extra: pip install -e ".[docs]"; its package downloads the Quarto binary, which this
# offline machine cannot), else by nbconvert: pages with a sidebar, a search box (a JSON index of headings, text and
# API names written at build time, searched by the site's own script), on-page contents, previous/next links, an API
# index (api.html) with source links to pyproject's Repository, and formulas by the site's own MathJax and fonts.
# A broken page (an error output, a missing image or script, a dead link or anchor) fails it.
docs: $(STAMP)
	@# MathJax for the formulas: the static files of jupyter-server-mathjax, without the Jupyter server it would pull in
	@$(BIN)/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('jupyter_server_mathjax') is None)" 2>/dev/null \
		|| $(BIN)/python -m pip install -q --no-deps "jupyter-server-mathjax>=0.2.6,<0.3" \
		|| echo "docs: could not install jupyter-server-mathjax; the formulas will show as TeX"
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/build_docs.py

# README.md is generated from nbs/index.ipynb, the site's home page: edit the notebook, then `make readme`.
readme: $(STAMP)
	$(BIN)/python tools/build_docs.py --readme

readme-check: $(STAMP)
	$(BIN)/python tools/build_docs.py --readme --check

# Notebooks are the source of truth: nbdev-clean + nbdev-export must change nothing.
sync-check: $(STAMP)
	@# nbdev-export rewrites pyproject.toml unchanged, and its new time would make the next target reinstall: kept
	@touch -r pyproject.toml $(VENV)/.pyproject-time
	@before="$$(git status --porcelain; git diff | sha1sum)"; \
	$(BIN)/nbdev-clean && $(BIN)/nbdev-export; \
	touch -r $(VENV)/.pyproject-time pyproject.toml; \
	after="$$(git status --porcelain; git diff | sha1sum)"; \
	if [ "$$before" != "$$after" ]; then \
	  echo "nbdev-clean/nbdev-export changed files: notebooks and library are out of sync"; \
	  git status --porcelain; exit 1; fi; \
	if [ -n "$$CI" ] && [ -n "$$(git status --porcelain)" ]; then \
	  echo "the tree is not clean after nbdev-clean/nbdev-export:"; git status --porcelain; exit 1; fi
	@echo "notebooks and library are in sync"

# Each notebook runs in one place: the chapters, the experiments and the other run notebooks here; nbs/runs/pretrain
# and nbs/runs/finetune are run by papermill in tests/test_runs.py and tests/test_finetune_run.py (their parameters
# and outputs checked), so nbdev-test skips them.
nbtest: $(STAMP)
	$(BIN)/nbdev-test --n-workers 2 --skip-file-re '^([_.]|pretrain\.ipynb$$|finetune\.ipynb$$)'

# The docs site is built once: `make test` builds it (`docs`) before the tests, which check that build
# (VIMPAC_DOCS_SITE) where nbconvert rendered it; run alone, tests/test_docs.py builds its own.
# Two workers on the two cores (pytest-xdist, issue 33), each test sent to the worker that is free; each worker and
# the processes it starts use one OpenMP thread (tests/conftest.py).
pytest: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal --durations=30 tests

# pyflakes, lines of at most 120 characters and one statement a line over the package, tests, benchmarks and the
# notebooks' code, and `ruff format` over all but the generated modules (pyproject.toml [tool.ruff], issue 22)
lint: $(STAMP)
	$(BIN)/ruff check --no-cache .
	$(BIN)/ruff format --no-cache --check .

# The GPU suite (issue 13): gpu tests and benchmarks, results in benchmarks/results/gpu-<name>.json, exit 1 on failure.
# `make bench-gpu DEVICE=cpu QUICK=1`: the same suite at toy sizes on a CPU (part of `make test`; its JSON goes to
# $$BENCH_OUT or <temp dir>/vimpac-bench, not to the tree).
# Its own install path (issue 20), for a fresh GPU box: first a stale CPU .venv is refused with one line when
# nvidia-smi sees a GPU (benchmarks/bench_env.py); then $(BENCH_STAMP) makes .venv with --system-site-packages
# where the system has torch (its CUDA build is kept; the CPU wheel only where no torch imports) and installs the kit
# with the `bench` extra only (pytest, nbdev for `#| gpu` notebook cells): not the dev extra (Gradio, Playwright)
# nor dall-e. A .venv that already has the kit installed (e.g. `make install`'s) and pytest is used as it is, with
# nothing installed. pip reads its usual settings: on a box without internet, point it at a wheelhouse or a mirror
# (PIP_FIND_LINKS=/path PIP_NO_INDEX=1, or PIP_INDEX_URL).
DEVICE ?= cuda
QUICK ?=
BENCH_STAMP := $(VENV)/.bench-stamp
bench-gpu:
	@$(PYTHON) benchmarks/bench_env.py --venv $(VENV) --device $(DEVICE)
	@$(MAKE) --no-print-directory bench-venv
	$(BIN)/python benchmarks/bench_gpu.py --device $(DEVICE) $(if $(QUICK),--quick,)

bench-venv: $(BENCH_STAMP)

$(BENCH_STAMP): pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c "import torch" >/dev/null 2>&1; then $(PYTHON) -m venv --system-site-packages $(VENV) \
	    && $(PYTHON) benchmarks/bench_env.py --link-site $(VENV); \
	  else $(PYTHON) -m venv $(VENV); fi; fi
	@$(BIN)/python -c "import torch" >/dev/null 2>&1 || $(PIP_WHEELS) $(BIN)/python -m pip install -q $(TORCH_CPU)
	@if [ -x $(BIN)/vimpac-pretrain ] && $(BIN)/python -c "import pytest" >/dev/null 2>&1; then \
	  echo "bench-gpu: $(VENV) has the kit and pytest; nothing to install"; \
	else $(PIP_WHEELS) $(BIN)/python -m pip install -q -e ".[bench]"; fi
	@touch $@

# An offline GPU box (issue 34): `make wheelhouse` on a machine with a package index writes the wheels of everything
# bench-gpu installs but torch (tools/wheelhouse.py) for the box's Python and platform; carry the folder over and run
# `make bench-gpu WHEELS=DIR` there, which installs from it with no index. The box's torch is kept, pre-releases too.
WHEELS ?=
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORM ?= manylinux_2_28_x86_64
PIP_WHEELS := $(if $(WHEELS),PIP_NO_INDEX=1 PIP_FIND_LINKS=$(abspath $(WHEELS)),)
wheelhouse:
	$(PYTHON) tools/wheelhouse.py --dest $(or $(WHEELS),wheelhouse) --python-version $(WHEEL_PYTHON) \
	  --platform $(WHEEL_PLATFORM)

# The edit loop (issue 33): lint, notebooks and library in sync, the README, the chapters' form and the import graph,
# then every test not marked `slow` (pyproject.toml's markers), two at a time (pytest-xdist). `make test` is the whole.
check: lint sync-check readme-check
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m "not slow" -p no:cacheprovider tests

# The chapters (two workers) and the docs site (one process) side by side, then the tests, among them the GPU suite's
# quick run on the CPU (`make bench-gpu DEVICE=cpu QUICK=1`, tests/test_bench_gpu.py): within 10 minutes on two cores.
test: lint sync-check readme-check
	$(MAKE) --no-print-directory -j2 nbtest docs
	$(if $(shell PATH="$(abspath $(BIN)):$$PATH" command -v quarto),,VIMPAC_DOCS_SITE=$(abspath _docs)) $(MAKE) --no-print-directory pytest

export: $(STAMP)
	$(BIN)/nbdev-export && $(BIN)/nbdev-clean

clean-venv:
	rm -rf $(VENV)
