"""The codec against a real Confluent-compatible registry: Apicurio Registry's ccompat API.

Schemas are registered by confluent-kafka's own SchemaRegistryClient and ProtobufSerializer;
Apicurio answers with `.proto` text (it ignores `format=serialized`), so these tests also run
the protoc path of the codec, with references under subjects that contain `/`.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import Decoder, HttpSchemaRegistry, UnknownSchema, write_frame
from tests.support.codec_test_support import compile_protos, import_generated

pytestmark = pytest.mark.integration


def _protos(pkg: str) -> dict[str, str]:
    common = (
        f'syntax = "proto3";\npackage {pkg}.shop;\n'
        "message Money { string currency = 1; int64 units = 2; }\n"
    )
    # A map<> field declared before a nested message: the message-index trap.
    orders = (
        f'syntax = "proto3";\npackage {pkg}.shop;\n'
        f'import "{pkg}/common.proto";\nimport "google/protobuf/timestamp.proto";\n'
        "message Order {\n  map<string, string> tags = 4;\n"
        "  message Line { string sku = 1; uint32 qty = 2; }\n"
        "  string id = 1;\n  Money total = 2;\n  google.protobuf.Timestamp at = 3;\n"
        "  repeated Line lines = 5;\n}\n"
        "message Refund { string order_id = 1; Money amount = 2; }\n"
    )
    return {f"{pkg}/common.proto": common, f"{pkg}/orders.proto": orders}


@pytest.fixture
def generated(tmp_path: Path):
    pkg = "apc" + uuid.uuid4().hex[:10]
    protos = _protos(pkg)
    compile_protos(protos, tmp_path / "gen")
    return pkg, protos, import_generated(f"{pkg}/orders.proto")


def _order(orders_pb2):
    order = orders_pb2.Order(id="o-1")
    order.tags["gift"] = "yes"
    order.total.currency = "EUR"
    order.total.units = 1250
    order.at.seconds = 1_700_000_000
    order.lines.add(sku="sku-1", qty=3)
    order.lines.add(sku="sku-2", qty=1)
    return order


def test_references_resolve_from_apicurio_text_answers(apicurio_url, generated):
    pkg, protos, orders_pb2 = generated
    sr = SchemaRegistryClient({"url": apicurio_url})
    common_subject = f"{pkg}/common.proto"  # a subject with '/', URL-encoded by both clients
    sr.register_schema(common_subject, Schema(protos[common_subject], "PROTOBUF"))
    order_id = sr.register_schema(
        f"{pkg}.orders-value",
        Schema(
            protos[f"{pkg}/orders.proto"],
            "PROTOBUF",
            [SchemaReference(common_subject, common_subject, 1)],
        ),
    )
    registry = HttpSchemaRegistry(apicurio_url)

    registered = registry.get_schema_by_id(order_id)
    assert registered.format == "text"  # Apicurio answers .proto text: compiled with protoc
    assert [(r.name, r.subject, r.version) for r in registered.references] == [
        (common_subject, common_subject, 1)
    ]
    assert registry.get_version(common_subject, 1).schema == protos[common_subject]

    order = _order(orders_pb2)
    decoder = Decoder(registry)
    record = decoder.decode(write_frame(order_id, (0,), order.SerializeToString()))
    assert record.message_type == f"{pkg}.shop.Order"
    assert orders_pb2.Order.FromString(record.message.SerializeToString()) == order
    assert record.message.total.units == 1250
    assert record.message.lines[1].sku == "sku-2"
    refund = decoder.decode(write_frame(order_id, (1,), b"\x0a\x03o-1"))
    assert (refund.message_type, refund.message.order_id) == (f"{pkg}.shop.Refund", "o-1")


def test_confluent_serializer_frames_decode_through_apicurio(apicurio_url, generated):
    pkg, _, orders_pb2 = generated
    sr = SchemaRegistryClient({"url": apicurio_url})
    order = _order(orders_pb2)
    line = orders_pb2.Order.Line(sku="nested", qty=7)
    refund = orders_pb2.Refund(order_id="o-9")
    refund.amount.units = -3
    frames = {
        name: ProtobufSerializer(cls, sr, {})(
            msg, SerializationContext(f"{pkg}.t", MessageField.VALUE)
        )
        for name, cls, msg in [
            ("Order", orders_pb2.Order, order),
            ("Order.Line", orders_pb2.Order.Line, line),
            ("Refund", orders_pb2.Refund, refund),
        ]
    }
    # The serializer registered the referenced file under its own subject on Apicurio.
    assert f"{pkg}/common.proto" in sr.get_subjects()
    decoder = Decoder(HttpSchemaRegistry(apicurio_url))
    for name, message in [("Order", order), ("Order.Line", line), ("Refund", refund)]:
        record = decoder.decode(frames[name])
        assert record.message_type == f"{pkg}.shop.{name}"
        assert record.message.SerializeToString(deterministic=True) == message.SerializeToString(
            deterministic=True
        )
    # confluent-kafka counts the map entry: Order.Line, declared after the map, is [0, 1].
    assert decoder.decode(frames["Order.Line"]).frame.message_indexes == (0, 1)


def test_apicurio_not_found_answers_are_unknown_schema_with_their_codes(apicurio_url, generated):
    pkg, protos, _ = generated
    registry = HttpSchemaRegistry(apicurio_url, max_retries=0, negative_ttl=0)
    with pytest.raises(UnknownSchema) as info:
        registry.get_schema_by_id(987_654_321)
    assert (info.value.http_status, info.value.registry_error_code) == (404, 40403)
    assert info.value.record_fault is True
    with pytest.raises(UnknownSchema) as info:
        registry.get_version(f"{pkg}/nothing.proto", 1)
    assert info.value.registry_error_code == 40401
    subject = f"{pkg}/common.proto"
    SchemaRegistryClient({"url": apicurio_url}).register_schema(
        subject, Schema(protos[subject], "PROTOBUF")
    )
    with pytest.raises(UnknownSchema) as info:
        registry.get_version(subject, 7)
    assert info.value.registry_error_code == 40402
    with pytest.raises(UnknownSchema):
        Decoder(registry).decode(write_frame(987_654_321, (0,), b""))
