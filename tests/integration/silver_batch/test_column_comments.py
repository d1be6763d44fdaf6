"""The .proto's field comments reach the silver Delta table and the catalog's view of it.

One schema registered as .proto text (so the registry's schema keeps its comments), one
``SilverBatch`` over two bronze rows framed with its id, then the column comments read from the
Delta log and through ``DESCRIBE TABLE`` in the session catalog; ``DESCRIBE TABLE EXTENDED``
names the message, its Kafka topic and its schema version, which the table's creating commit
holds: registering it commits nothing more.
"""

from __future__ import annotations

import uuid
from typing import Any

from codec import SchemaResolver, open_registry
from lakehouse.catalog import CatalogDatabases
from pipelines.naming import table_name_for
from pipelines.silver import SilverBatch
from tests.support.ops_itkit import framed, ping_payload
from tests.support.silver_testkit import bronze_row, write_bronze
from tests.support.stack import register_proto_schema

TOPIC = "ut.commented"
SCHEMA = (
    'syntax = "proto3";\npackage commentit.v1;\n\n// A probe.\nmessage Ping {\n'
    "  // Its name.\n  string id = 1;\n  int64 n = 2;\n}\n"
)


def test_field_comments_become_column_comments(spark: Any, tmp_path: Any, registry: Any) -> None:
    schema_id = register_proto_schema(registry.url, f"{TOPIC}-value", SCHEMA)
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_commented"
    rows = [bronze_row(framed(schema_id, ping_payload(f"p{i}", i)), TOPIC, i) for i in range(2)]
    write_bronze(spark, bronze, rows)
    database = f"cm{uuid.uuid4().hex[:8]}"
    batch = SilverBatch(
        spark,
        lake,
        "88888888-8888-8888-8888-888888888888",
        SchemaResolver(open_registry(registry.url)),
        databases=CatalogDatabases(bronze="", silver=database, quarantine="", quality=""),
    )
    batch(spark.read.format("delta").load(bronze), 0)
    name = table_name_for("commentit.v1.Ping")
    fields = spark.read.format("delta").load(f"{lake}/silver/{name}").schema
    assert fields["id"].metadata.get("comment") == "Its name."
    assert "comment" not in fields["n"].metadata
    described = {r[0]: r[2] for r in spark.sql(f"DESCRIBE TABLE {database}.{name}").collect()}
    assert described["id"] == "Its name."
    assert not described["n"]
    # the table's comment and properties: the message's comment, its topic, its schema id
    extended = spark.sql(f"DESCRIBE TABLE EXTENDED {database}.{name}").collect()
    text = "\n".join(f"{r[0]}\t{r[1]}" for r in extended)
    assert "A probe." in text
    assert f"Kafka topic: {TOPIC}. Schema registry versions: id:{schema_id}." in text
    assert f"protolake.kafka_topics={TOPIC}" in text
    assert f"protolake.schema_versions=id:{schema_id}" in text
    # created with them, then appended to: the registration found nothing to change
    history = spark.sql(f"DESCRIBE HISTORY delta.`{lake}/silver/{name}`").collect()
    assert sorted((r["version"], r["operation"]) for r in history) == [
        (0, "CREATE TABLE"),
        (1, "WRITE"),
    ]
