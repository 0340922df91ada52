# Two entry points for a fresh machine (see README):
#   make suggest   set up .venv and run the main job
#   make test      set up .venv and run lint, types, the test suite and autopar under the lowest Typer allowed
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,profile,frameworks]'
	touch $@

# SGLang's pinned wheel (3.7 MB, pure Python): tests/unit/emit/test_serve_emit.py reads the launch flags autopar
# prints from its parser; offline the download fails quietly and that test is skipped
SGLANG_WHEEL := $(VENV)/wheels/sglang-0.5.6.post2-py3-none-any.whl
$(SGLANG_WHEEL): | $(VENV)/.installed
	-$(PY) -m pip download -q --no-deps --only-binary :all: --retries 1 --timeout 10 -d $(VENV)/wheels sglang==0.5.6.post2

# autopar under the lowest Typer pyproject.toml allows, in a venv of its own with only the runtime dependencies
TYPER_FLOOR := $(shell sed -n 's/.*"typer>=\([0-9.]*\),.*/\1/p' pyproject.toml)
FLOOR_VENV := $(VENV)-typer-floor
$(FLOOR_VENV)/.installed: pyproject.toml
	python3 -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/pip install -q "typer==$(TYPER_FLOOR)" -e .
	touch $@

typer-floor: $(FLOOR_VENV)/.installed
	$(FLOOR_VENV)/bin/python tests/support/typer_floor.py

setup: $(VENV)/.installed

suggest: $(VENV)/.installed
	$(VENV)/bin/autopar suggest llama3-70b --hardware h100-sxm --gpus 64

test: $(VENV)/.installed $(SGLANG_WHEEL) typer-floor
	$(VENV)/bin/ruff check autopar tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

.PHONY: setup suggest test typer-floor
