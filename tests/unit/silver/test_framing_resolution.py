"""Framing columns and driver-side resolution, on frames from confluent-kafka's serializer."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from silver_testkit import make_order

from codec import RegistryUnavailable, SchemaResolver, open_registry
from pipelines.silver.framing import frame_columns, parse_schema_key, schema_key
from pipelines.silver.resolution import resolve_schema_key, resolve_schema_keys


def test_schema_key_round_trip() -> None:
    assert schema_key(42, None, (0, 1)) == "id:42|0.1"
    assert parse_schema_key("id:42|0.1") == (42, None, (0, 1))
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert parse_schema_key(schema_key(None, guid, (2,))) == (None, guid, (2,))


def test_frame_columns_of_real_frames(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 1), "fr.orders")
    item = producer.frame(v1.LineItem(sku="x", quantity=1), "fr.items")
    magic, sid, guid, idx, off, key, code, stage, reason, kkey, koff = frame_columns(
        value, None, None
    )
    assert (magic, guid, idx, code, kkey, koff) == (0, None, [0], None, None, None)
    assert key == f"id:{sid}|0" and off == 6
    cols = frame_columns(item, None, None)
    # LineItem comes after the map's synthetic entry: nested message 1 of Order.
    assert cols[3] == [0, 1] and cols[5].endswith("|0.1")


def test_framed_key_is_recognised_and_plain_key_is_not(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 2), "fr.keyed")
    key = producer.frame(v1.Ping(id="k-2"), "fr.keyed", is_key=True)
    cols = frame_columns(value, key, None)
    assert cols[9] is not None and cols[9].endswith("|1") and cols[10] == 7  # [1] is 02 02
    plain = frame_columns(value, b"order-2", None)
    assert plain[9] is None and plain[10] is None and plain[6] is None


@pytest.mark.parametrize(
    "value,code",
    [
        (None, "EMPTY_VALUE"),
        (b"", "EMPTY_VALUE"),
        (b"\x07\x00\x00\x00\x01\x00", "BAD_MAGIC"),
        (b'{"a": 1}', "BAD_MAGIC"),
        (b"\x00\x00\x00", "TRUNCATED"),
        (b"\x00\x00\x00\x00\x01\x01", "BAD_INDEXES"),
    ],
)
def test_bad_framing_gives_the_codec_code(value: bytes | None, code: str) -> None:
    cols = frame_columns(value, None, None)
    assert cols[6] == code and cols[7] == "framing" and cols[8]
    assert cols[5] is None


def test_header_form(producer: Any, versions: Any) -> None:
    value = producer.frame(make_order(versions["v1"], 3), "fr.hdr")
    header = value[:6]  # 00 | id | [0]
    cols = frame_columns(value[6:], None, [("__value_schema_id", header)])
    assert (
        cols[6] is None and cols[4] == 0 and cols[5] == f"id:{struct.unpack('>I', value[1:5])[0]}|0"
    )


def test_resolution_once_per_schema_and_faults(registry: Any, producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 4), "fr.res")
    sid = struct.unpack(">I", value[1:5])[0]
    resolver = SchemaResolver(open_registry(registry.url))
    before = len(registry.requests)
    got = resolve_schema_keys(
        resolver, [f"id:{sid}|0", f"id:{sid}|0.1", f"id:{sid}|1", f"id:{sid}|9", "id:999999|0"]
    )
    assert got[f"id:{sid}|0"].message_type == "silvertest.v1.Order"
    assert got[f"id:{sid}|0.1"].message_type == "silvertest.v1.Order.LineItem"
    assert got[f"id:{sid}|1"].message_type == "silvertest.v1.Ping"
    assert got[f"id:{sid}|9"].code == "UNKNOWN_MESSAGE"
    assert got["id:999999|0"].code == "UNKNOWN_SCHEMA" and got["id:999999|0"].stage == "registry"
    by_id = [r for r in registry.requests[before:] if f"/schemas/ids/{sid}" in str(r)]
    assert len(by_id) == 1, registry.requests[before:]
    # cached across calls: no new request for the same schema
    n = len(registry.requests)
    resolve_schema_key(resolver, f"id:{sid}|0")
    assert len(registry.requests) == n


def test_not_protobuf_is_a_record_fault(registry: Any) -> None:
    avro_id = registry.register("fr.avro-value", '{"type": "string"}', schema_type="AVRO")
    resolver = SchemaResolver(open_registry(registry.url))
    r = resolve_schema_key(resolver, f"id:{avro_id}|0")
    assert r.code == "NOT_PROTOBUF" and r.stage == "schema"


def test_registry_outage_raises() -> None:
    from registry_server import start_registry_server

    handle = start_registry_server(port=0)
    url = handle.url
    handle.stop()
    resolver = SchemaResolver(
        open_registry(url, max_retries=1, connect_timeout=0.5, read_timeout=0.5)
    )
    with pytest.raises(RegistryUnavailable):
        resolve_schema_key(resolver, "id:1|0")
