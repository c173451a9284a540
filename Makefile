# The two set-up commands of README.md: `make start` and `make test`.
# `make start` installs what the server needs (requirements.txt) and says
# what it is doing at each step; `make test` adds the test tools
# (requirements-test.txt: pytest, Playwright, moto, ...) to the same virtualenv
# and the JavaScript packages (axe-core, for the browser tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar on

.PHONY: start test test-fast typecheck server-deps system-deps oidc-provider

$(PY):
	@echo "==> Making the virtualenv $(VENV)/ (once)"
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-runtime: requirements.txt | $(PY)
	@echo "==> Installing the server's packages (requirements.txt); pip shows each one as it comes"
	$(PIP) -r requirements.txt
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed-runtime requirements-test.txt loadtest/requirements.txt
	@echo "==> Installing the test tools (requirements-test.txt); pip shows each one as it comes"
	$(PIP) -r requirements-test.txt
	@touch $@

# axe-core, which the browser tests inject into each page (package.json pins
# it): npm ci installs the locked JavaScript packages, scripts not run.
AXE := node_modules/axe-core/axe.min.js
$(AXE): package.json package-lock.json
	@echo "==> Installing the JavaScript packages (npm ci): axe-core for the browser tests' accessibility checks"
	npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

server-deps:
	@echo "==> Checking the system packages the server needs (scripts/install-system-deps server)"
	@scripts/install-system-deps server

system-deps:
	@echo "==> Checking the system packages the server and the tests need (scripts/install-system-deps)"
	@scripts/install-system-deps

# The IDE on the embedded defaults: data in ./data, a private PostgreSQL,
# demo accounts printed at first start.
# Students' programs on a child runner (a process of its own without the
# server's secrets: docs/operators.md, "Runners") unless SANDBOX says otherwise.
start: server-deps $(VENV)/.installed-runtime
	@echo "==> Starting the server (the first start also makes its PostgreSQL database under ./data)"
	DEMO=$${DEMO:-1} SANDBOX=$${SANDBOX:-remote} $(PY) -m server

# mypy over server/ (mypy.ini: strict for files/ and exercises/, child/ code
# aside), before the tests: a type error fails the build.
typecheck: $(VENV)/.installed-test
	@echo "==> Checking the server's types (mypy, mypy.ini)"
	$(PY) -m mypy

# The tests start hundreds of Python processes (servers, their file
# processes, the tools): with bytecode caching off (PYTHONDONTWRITEBYTECODE,
# which some machines set) each would compile the server from source, and
# each pytest process would rewrite every test module's asserts again. The
# caches go under the virtualenv, not beside the sources.
PYCACHE := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache

# The sign-in tests' OpenID provider (tests/oidc_provider/, Go): built once
# from the Go module proxy into ~/.cache/pyclassroom and reused while its
# sources are unchanged; built here, before the test processes start.
oidc-provider: $(VENV)/.installed-test
	@echo "==> Building the sign-in tests' OpenID provider (Go, once; then cached)"
	$(PY) -c "from tests.oidc_support import provider_binary; print(provider_binary())"

test: oidc-provider typecheck system-deps $(VENV)/.installed-test $(AXE)
	$(PYCACHE) $(PY) -m pytest

# The tests that need no server process, PostgreSQL, root, Docker, Chromium,
# the load-test tools or the deployment's: only the virtualenv (the `fast`
# marker, given in tests/conftest.py from what each test uses). FAST_TIER=1
# fails a test that reaches for one of them anyway. Temporary files go to
# memory when there is a /dev/shm: the history tests save thousands of
# versions, and a disk the machine's other work keeps busy makes each
# rename wait.
test-fast: $(VENV)/.installed-test
	$(PYCACHE) FAST_TIER=1 TMPDIR=$$(test -w /dev/shm && echo /dev/shm || echo $${TMPDIR:-/tmp}) \
		$(PY) -m pytest -m fast -n 2 --dist load
