"""Two silver queries of one job write one message type from two topics (a bronze table each):
the table's catalog properties keep both topics and every schema version, whichever query
registers it last (``pipelines.silver.registration``)."""

from __future__ import annotations

import uuid
from typing import Any

from codec import SchemaResolver, open_registry
from lakehouse.catalog import CatalogDatabases
from lakehouse.tables import table_properties
from pipelines.naming import KAFKA_TOPICS_PROPERTY, table_name_for
from pipelines.silver import SilverBatch
from pipelines.silver.tables import SCHEMA_VERSIONS_PROPERTY
from tests.support.silver_testkit import run_ping_batch
from tests.support.stack import register_proto_schema

V1 = 'syntax = "proto3";\npackage regmerge.v1;\nmessage Ping {\n  string id = 1;\n  int64 n = 2;\n}\n'
V2 = V1.replace("  int64 n = 2;\n", "  int64 n = 2;\n  string note = 3;\n")


def test_a_query_registering_later_keeps_what_another_registered(
    spark: Any, tmp_path: Any, registry: Any
) -> None:
    run = uuid.uuid4().hex[:8]
    topic_a, topic_b = f"regmerge.{run}.a", f"regmerge.{run}.b"
    v1 = register_proto_schema(registry.url, f"{topic_a}-value", V1)
    lake = str(tmp_path / "lake")
    database = f"rm{run}"
    resolver = SchemaResolver(open_registry(registry.url))
    databases = CatalogDatabases(bronze="", silver=database, quarantine="", quality="")

    def run_batch(batch: SilverBatch, topic: str, schema_id: int, batch_id: int) -> None:
        run_ping_batch(spark, lake, batch, topic, schema_id, batch_id)

    query_a, query_b = (
        SilverBatch(spark, lake, str(uuid.uuid4()), resolver, databases=databases) for _ in range(2)
    )
    run_batch(query_a, topic_a, v1, 0)  # creates the table: topic a, v1
    run_batch(query_b, topic_b, v1, 0)  # registers it: topics a and b
    v2 = register_proto_schema(registry.url, f"{topic_a}-value", V2)
    run_batch(query_a, topic_a, v2, 1)  # a version query a did not know: registered again
    props = table_properties(spark, f"{lake}/silver/{table_name_for('regmerge.v1.Ping')}")
    assert props[KAFKA_TOPICS_PROPERTY] == ",".join(sorted([topic_a, topic_b]))
    assert props[SCHEMA_VERSIONS_PROPERTY] == f"id:{v1},id:{v2}"
