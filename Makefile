# protolake: `make demo` runs the pipeline on a local stack (`make demo-s3`: with the lakehouse
# on the stack's S3-compatible store, s3a://protolake-demo/lakehouse); `make test` runs the static checks
# (`make lint`) and then the whole suite.
# Both install what is missing first (infra/setup.sh), so a fresh clone needs nothing else.
SHELL := /bin/bash
VENV ?= $(or $(PROTOLAKE_VENV),.venv)
PY := $(VENV)/bin/python
# every script (setup, the stack, the tests) uses the same virtualenv
export PROTOLAKE_VENV := $(abspath $(VENV))
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: setup demo demo-s3 test test-unit test-spark lint bench stack-up stack-down stack-status clean

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
	@echo "Query every table by name (README, 'For analysts'):"
	@echo "  JDBC/ODBC  jdbc:hive2://127.0.0.1:$${PROTOLAKE_SQL_PORT:-10000}/  (HiveServer2, no password on loopback)"
	@echo "  Spark      --conf spark.sql.catalogImplementation=hive --conf spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:$${PROTOLAKE_METASTORE_PORT:-9083} (plus Delta's two)"
	@echo "  by path    DuckDB delta_scan('run/lakehouse/silver/<table>'), deltalake.DeltaTable(...)"

# The same demo and report, the lakehouse in the stack's SeaweedFS (infra/stack.sh up s3), with
# the credential it generated (run/s3.env: AWS_* variables the demo's [s3] settings read).
demo-s3: setup
	@infra/stack.sh up
	@infra/stack.sh up s3
	@set -a; . "$${PROTOLAKE_RUN_DIR:-run}/s3.env"; set +a; \
	  $(PY) -m pipelines.demo --lakehouse s3a://protolake-demo/lakehouse

test: setup
	@infra/run_tests.sh

test-unit: setup
	@$(PY) -m pytest tests/unit -q

# Spark with Delta, no Kafka nor registry: tests/spark.
test-spark: setup
	@$(PY) -m pytest tests/spark -q

lint: setup
	@PROTOLAKE_VENV=$(VENV) infra/lint.sh

bench: setup
	@infra/stack.sh up
	@infra/run_bench.sh

clean:
	@infra/stack.sh down || true
	rm -rf "$${PROTOLAKE_RUN_DIR:-run}"
