"""Two silver queries of one driver write one message type from two topics: each plans its
batch against the table's columns as either last wrote them. A version that conflicts with a
column the other query added is a schema conflict (quarantined), not a failed append."""

from __future__ import annotations

import uuid
from typing import Any

from codec import SchemaResolver, open_registry
from pipelines.naming import table_name_for
from pipelines.silver import SilverBatch
from tests.support.silver_testkit import run_ping_batch
from tests.support.stack import register_proto_schema

V1 = 'syntax = "proto3";\npackage shared.v1;\nmessage Ping {\n  string id = 1;\n  int64 n = 2;\n}\n'
V2 = V1.replace("  int64 n = 2;\n", "  int64 n = 2;\n  string note = 3;\n")
V3 = V1.replace("  int64 n = 2;\n", "  int64 n = 2;\n  int64 note = 3;\n")  # v2's note, retyped


def test_a_version_conflicting_with_what_another_query_added_is_quarantined(
    spark: Any, tmp_path: Any, registry: Any
) -> None:
    run = uuid.uuid4().hex[:8]
    topic_a, topic_b = f"shared.{run}.a", f"shared.{run}.b"
    v1 = register_proto_schema(registry.url, f"{topic_b}-value", V1)
    v2 = register_proto_schema(registry.url, f"{topic_a}-value", V2)
    v3 = register_proto_schema(registry.url, f"{topic_b}.late-value", V3)
    lake = str(tmp_path / "lake")
    resolver = SchemaResolver(open_registry(registry.url))

    def run_batch(batch: SilverBatch, topic: str, schema_id: int, batch_id: int) -> None:
        run_ping_batch(spark, lake, batch, topic, schema_id, batch_id)

    query_a, query_b = (SilverBatch(spark, lake, str(uuid.uuid4()), resolver) for _ in range(2))
    run_batch(query_b, topic_b, v1, 0)  # creates the table: id, n
    run_batch(query_a, topic_a, v2, 0)  # adds note (a string)
    run_batch(query_b, topic_b, v3, 1)  # note as a number: a conflict with the table now
    assert query_b.history[-1].quarantined == {"SCHEMA_CONFLICT": 1}
    table = spark.read.format("delta").load(f"{lake}/silver/{table_name_for('shared.v1.Ping')}")
    assert dict(table.dtypes)["note"] == "string" and table.count() == 2
