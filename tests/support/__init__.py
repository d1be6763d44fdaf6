"""Helpers shared by the test suite, imported as ``tests.support.<module>``.

- ``stack``: addresses of the local stack (Kafka, the registry) and ``free_port``.
- ``*_testkit`` / ``*_itkit``: per-area builders of test data (protos compiled for the codec,
  proto_types and silver tests; bronze, silver, ops and quality lakehouses).
- ``airflow_kit``: a throw-away Airflow installation running the repository's DAGs.
- ``protos/``: the .proto files those kits compile.

``infra/`` and ``dags/`` are script folders, not packages: pyproject.toml's pytest
``pythonpath`` puts both on ``sys.path`` (the one place that does), so tests import
``registry_server`` and ``protolake_support`` by their own names.
"""
