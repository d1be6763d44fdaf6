"""Kafka -> bronze -> silver with a real Confluent-compatible registry: Apicurio Registry.

The records are framed by confluent-kafka's ProtobufSerializer (schema v1, registered by the
serializer itself) and by the codec's writer (schema v2 of the same subject, which adds a
field), produced to the real broker, landed by the real bronze job and decoded by the real
silver job, which resolves every schema from Apicurio's /apis/ccompat/v7.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import Decoder, HttpSchemaRegistry, write_frame
from lakehouse.layout import Layout
from pipelines import bronze, silver
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant
from tests.support.codec_test_support import compile_protos, import_generated
from tests.support.silver_itkit import make_config, unique_prefix

pytestmark = pytest.mark.integration

ORDER_V1 = """syntax = "proto3";
package {pkg}.shop;
import "{pkg}/common.proto";
import "google/protobuf/timestamp.proto";
message Order {{
  string id = 1;
  Money total = 2;
  google.protobuf.Timestamp at = 3;
  repeated string skus = 4;
}}
"""
ORDER_V2 = ORDER_V1.replace(
    "repeated string skus = 4;", "repeated string skus = 4;\n  string channel = 5;"
)
COMMON = 'syntax = "proto3";\npackage {pkg}.shop;\nmessage Money {{ string currency = 1; int64 units = 2; }}\n'


@pytest.mark.timeout(2400)
def test_silver_resolves_every_schema_from_apicurio(
    bootstrap: str, apicurio_url: str, spark: Any, tmp_path: Path
) -> None:
    pkg = "aps" + uuid.uuid4().hex[:10]
    topic = unique_prefix("apicurio") + "orders"
    common_name = f"{pkg}/common.proto"
    compile_protos(
        {common_name: COMMON.format(pkg=pkg), f"{pkg}/orders.proto": ORDER_V1.format(pkg=pkg)},
        tmp_path / "gen",
    )
    v1 = import_generated(f"{pkg}/orders.proto")
    sr = SchemaRegistryClient({"url": apicurio_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize_v1 = ProtobufSerializer(v1.Order, sr, {})

    records: list[tuple[bytes, bytes]] = []
    expected: dict[str, dict[str, Any]] = {}
    for i in range(40):
        msg = v1.Order(id=f"v1-{i}", skus=[f"s{i}", "t"])
        msg.total.currency, msg.total.units = "EUR", 100 + i
        msg.at.seconds = 1_700_000_000 + i
        records.append((msg.id.encode(), serialize_v1(msg, ctx)))
        expected[msg.id] = {"units": 100 + i, "channel": None, "skus": [f"s{i}", "t"]}
    v1_id = int.from_bytes(records[0][1][1:5], "big")

    # v2 of the same subject adds a field; the payloads are built with the codec's own class.
    v2_id = sr.register_schema(
        f"{topic}-value",
        Schema(
            ORDER_V2.format(pkg=pkg),
            "PROTOBUF",
            [SchemaReference(common_name, common_name, 1)],
        ),
    )
    assert v2_id != v1_id
    order_v2 = Decoder(HttpSchemaRegistry(apicurio_url)).resolver.resolve_id(v2_id)
    order_v2_class = order_v2.message_class_for((0,))
    for i in range(30):
        msg = order_v2_class(id=f"v2-{i}", channel="web" if i % 2 else "app", skus=["x"])
        msg.total.units = 500 + i
        records.append((msg.id.encode(), write_frame(v2_id, (0,), msg.SerializeToString())))
        expected[msg.id] = {"units": 500 + i, "channel": msg.channel, "skus": ["x"]}
    unknown_id = 2_000_000_000 + int(uuid.uuid4().int % 1000)
    for i in range(4):  # a schema id Apicurio has never heard of
        records.append((f"bad-{i}".encode(), write_frame(unknown_id, (0,), b"\x0a\x01z")))

    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    cfg = make_config(tmp_path / "lake", [topic], apicurio_url)
    lake = cfg.lakehouse_path
    bronze.run(cfg, trigger="available-now", spark=spark)
    silver.run(cfg, trigger="available-now", spark=spark)

    report = check_invariant(spark, lake)
    assert report.holds, report.summary() + f" {report.offenders}"
    assert report.bronze_records == len(records)
    table = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(f'{pkg}.shop.Order')}")
    rows = {
        r["id"]: r
        for r in table.select("id", "total.units", "channel", "skus", "_schema_id").collect()
    }
    assert set(rows) == set(expected)
    for ident, want in expected.items():
        row = rows[ident]
        assert (row["units"], row["channel"], list(row["skus"])) == (
            want["units"],
            want["channel"],
            want["skus"],
        ), ident
        assert row["_schema_id"] == (v1_id if ident.startswith("v1-") else v2_id)
    quarantined = spark.read.format("delta").load(Layout(lake).quarantine)
    reasons = {(r["reason_code"], r["_schema_id"]) for r in quarantined.collect()}
    assert reasons == {("UNKNOWN_SCHEMA", unknown_id)}
    assert quarantined.count() == 4
