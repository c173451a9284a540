# The two set-up commands of the README: `make start` and `make test`.
# Each creates the virtualenv from the pinned requirements when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: start test system-deps

$(VENV)/.installed: requirements.txt requirements-test.txt loadtest/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-test.txt
	touch $@

system-deps:
	@scripts/install-system-deps

# The IDE on the embedded defaults: data in ./data, a private PostgreSQL,
# demo accounts printed at first start.
start: system-deps $(VENV)/.installed
	DEMO=$${DEMO:-1} $(PY) -m server

test: system-deps $(VENV)/.installed
	$(PY) -m pytest
