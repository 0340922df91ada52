# Two entry points for a fresh machine (see README):
#   make suggest   set up .venv and run the main job
#   make test      set up .venv and run lint, types and the test suite
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,profile,frameworks]'
	touch $@

setup: $(VENV)/.installed

suggest: $(VENV)/.installed
	$(VENV)/bin/autopar suggest llama3-70b --hardware h100-sxm --gpus 64

test: $(VENV)/.installed
	$(VENV)/bin/ruff check autopar tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

.PHONY: setup suggest test
