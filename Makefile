# Two commands a newcomer needs (see README): `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch lies on local disk; installing it first keeps pip from
	# pulling a multi-GB CUDA build to satisfy the torch>= range in pyproject.toml.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/planner serve --host 127.0.0.1 --port 8000

# The whole suite on two worker processes: the tests share no ports, files or databases (each
# live server gets a listening socket its test bound, each test its own temporary folder and
# PostgreSQL database).
test: install browser
	$(PY) -m pytest -n 2

# The explorer's browser tests drive Debian's Chromium (Playwright's own browser download is
# not reachable from these machines): install it when it is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || $(SUDO) apt-get install -y -q chromium >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q chromium >/dev/null; }

# The edit loop: everything but the tests that start processes or a live service, on two
# worker processes (these tests share no ports, files or database).
test-fast: install
	$(PY) -m pytest -q -m "not slow" -p no:cacheprovider -n 2

lint: install
	$(VENV)/bin/ruff check planner api tests benchmarks docs
	$(VENV)/bin/mypy

.PHONY: install run test test-fast lint browser
