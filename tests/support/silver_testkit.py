"""Test helpers for silver: real frames from confluent-kafka's ProtobufSerializer, bronze tables.

Message classes are built from .proto files compiled by protoc (codec.protoc) into a fresh
descriptor pool per schema version (two versions of ``silvertest.v1.Order`` cannot share the
default pool); confluent-kafka's serializer registers them (and their references) with a real
registry server (infra/registry_server/) and writes the real Confluent framing.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTOS = Path(__file__).resolve().parent / "protos" / "silver"
REPO = Path(__file__).resolve().parents[2]

BRONZE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>, "
    "_ingested_at timestamp, _ingest_date date"
)


def compile_version(version: str) -> descriptor_pb2.FileDescriptorSet:
    """Compile protos/<version>/silvertest/v1/order.proto (+ common, + WKT) to a descriptor set."""
    from codec.protoc import compile_descriptor_set

    raw = compile_descriptor_set(
        PROTOS / version,
        ["silvertest/v1/order.proto"],
        extra_args=[f"-I{PROTOS / 'common'}"],
        source_info=False,
    )
    return descriptor_pb2.FileDescriptorSet.FromString(raw)


@dataclass
class Version:
    """Message classes of one schema version."""

    pool: descriptor_pool.DescriptorPool
    Order: Any
    LineItem: Any
    Ping: Any
    Money: Any


def load_version(version: str) -> Version:
    fds = compile_version(version)
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

    return Version(
        pool,
        cls("silvertest.v1.Order"),
        cls("silvertest.v1.Order.LineItem"),
        cls("silvertest.v1.Ping"),
        cls("silvertest.Money"),
    )


class Producer:
    """Serializes messages with confluent-kafka's ProtobufSerializer against a registry URL."""

    def __init__(self, registry_url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.client = SchemaRegistryClient({"url": registry_url})
        self._serializers: dict[tuple[int, str], Any] = {}

    def frame(self, msg: Any, topic: str, *, is_key: bool = False) -> bytes:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        cache_key = (id(type(msg)), topic)
        ser = self._serializers.get(cache_key)
        if ser is None:
            ser = ProtobufSerializer(type(msg), self.client, {"use.deprecated.format": False})
            self._serializers[cache_key] = ser
        field = MessageField.KEY if is_key else MessageField.VALUE
        return ser(msg, SerializationContext(topic, field))


def make_order(v: Version, i: int, *, with_v2: bool = False, conflict: bool = False) -> Any:
    o = v.Order(order_id=f"ord-{i:05d}", status=1 + i % 2)
    o.created_at.FromDatetime(dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i))
    o.attributes["channel"] = "web" if i % 2 else "app"
    item = o.items.add(sku=f"sku-{i % 7}", quantity=i % 5 + 1)
    item.price.currency = "EUR"
    item.price.units = 100 + i
    if conflict:
        o.points = f"p{i}"
    else:
        o.points = 2**64 - 1 - i if i % 3 == 0 else i
    if with_v2:
        o.note = f"note {i}"
        item.gift_message = "hello"
    return o


def bronze_row(
    value: bytes | None,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    key: bytes | None = None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> tuple[Any, ...]:
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=offset)
    return (
        key,
        value,
        topic,
        partition,
        offset,
        ts,
        0,
        [{"key": k, "value": v} for k, v in headers],
        ts,
        ts.date(),
    )


def write_bronze(spark: Any, path: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """Append bronze-shaped rows to a Delta table at ``path``."""
    spark.createDataFrame(list(rows), BRONZE_DDL).write.format("delta").mode("append").save(path)


def run_ping_batch(
    spark: Any, lake: str, batch: Any, topic: str, schema_id: int, batch_id: int
) -> None:
    """Run silver batch ``batch`` (a ``SilverBatch``) on one framed Ping of ``topic``, its
    bronze rows written alone under ``<lake>/bronze/<topic>.<batch_id>``."""
    from tests.support.ops_itkit import framed, ping_payload

    bronze = f"{lake}/bronze/{topic}.{batch_id}"
    rows = [bronze_row(framed(schema_id, ping_payload("p", batch_id)), topic, batch_id)]
    write_bronze(spark, bronze, rows)
    batch(spark.read.format("delta").load(bronze), batch_id)


def poison_values(payload: bytes) -> dict[str, bytes | None]:
    """Poison record values by the reason code each must get (schema id 999999 is unknown)."""
    return {
        "EMPTY_VALUE": b"",
        "BAD_MAGIC": b"\x07\x00\x00\x00\x01\x00" + payload,
        "TRUNCATED": b"\x00\x00\x00",
        "PLAIN_JSON": b'{"order_id": "ord-1"}',
        "UNKNOWN_SCHEMA": b"\x00" + struct.pack(">I", 999999) + b"\x00" + payload,
    }
