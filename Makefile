# protolake: `make demo` runs the pipeline on a local stack; `make test` runs the whole suite.
# Both install what is missing first (infra/setup.sh), so a fresh clone needs nothing else.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test test-unit lint bench stack-up stack-down stack-status clean

setup:
	@infra/setup.sh

stack-up: setup
	@infra/stack.sh up

stack-down:
	@infra/stack.sh down

stack-status:
	@infra/stack.sh status

demo: setup
	@infra/stack.sh up
	@$(PY) -m pipelines.demo

test: setup
	@infra/run_tests.sh

test-unit: setup
	@$(PY) -m pytest tests/unit -q

lint: setup
	@$(VENV)/bin/ruff check codec pipelines quality dags tests infra bench
	@$(VENV)/bin/mypy codec pipelines quality
	@$(VENV)/bin/lint-imports

bench: setup
	@infra/stack.sh up
	@infra/run_bench.sh

clean:
	@infra/stack.sh down || true
	rm -rf run
