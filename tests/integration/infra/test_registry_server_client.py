"""infra/registry_server driven by confluent-kafka's real SchemaRegistryClient and serdes."""

from __future__ import annotations

import base64
import struct

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from registry_server import start_registry_server
from registry_server.protobuf import compile_proto_text

pytestmark = pytest.mark.integration

CTX = SerializationContext("infratest.orders", MessageField.VALUE)


def _order(orders_pb2):
    order = orders_pb2.Order(id="o-1", card="4111", priority=2, status=orders_pb2.Order.PAID)
    order.total.currency = "EUR"
    order.total.units = 1250
    order.lines.add(sku="sku-1", qty=3)
    order.tags["gift"] = 1
    order.audit.by = "alice"
    order.audit.at.seconds = 1_700_000_000
    return order


def _file_proto(module) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fdp)
    return fdp


def _without_json_names(fdp: descriptor_pb2.FileDescriptorProto):
    """protoc's descriptor sets carry default json_name; generated modules do not."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(fdp.SerializeToString())

    def strip(messages):
        for message in messages:
            for f in message.field:
                f.ClearField("json_name")
            strip(message.nested_type)

    strip(fdp.message_type)
    return fdp


def test_serializer_registers_references_and_deserializer_reads_back(
    registry, sr_client, proto_modules
):
    common_pb2, orders_pb2 = proto_modules
    serializer = ProtobufSerializer(orders_pb2.Order, sr_client, {})
    order = _order(orders_pb2)

    frame = serializer(order, CTX)

    assert sorted(sr_client.get_subjects()) == ["infratest.orders-value", "infratest/common.proto"]
    main = sr_client.get_latest_version("infratest.orders-value")
    common = sr_client.get_latest_version("infratest/common.proto")
    assert (main.version, common.version) == (1, 1)
    assert main.schema_id != common.schema_id
    assert [(r.name, r.subject, r.version) for r in main.schema.references] == [
        ("infratest/common.proto", "infratest/common.proto", 1)
    ]
    # Confluent framing: magic 0, big-endian schema id, message indexes ([0] -> single 0).
    assert frame[0] == 0
    assert struct.unpack(">I", frame[1:5])[0] == main.schema_id
    assert frame[5] == 0
    assert frame[6:] == order.SerializeToString()

    fresh = SchemaRegistryClient({"url": registry.url})  # no cache: everything over HTTP
    decoded = ProtobufDeserializer(orders_pb2.Order, {}, fresh)(frame, CTX)
    assert decoded == order
    assert ("GET", f"/schemas/ids/{main.schema_id}") in registry.requests


def test_second_message_type_of_the_same_file_gets_its_index(registry, sr_client, proto_modules):
    _, orders_pb2 = proto_modules
    refund = orders_pb2.Refund(order_id="o-1")
    frame = ProtobufSerializer(orders_pb2.Refund, sr_client, {})(
        refund, SerializationContext("infratest.refunds", MessageField.VALUE)
    )
    # Refund is the file's second message: indexes [1] -> count 1 (zigzag 2), index 1 (2).
    assert frame[5:7] == b"\x02\x02"
    assert "infratest.refunds-value" in sr_client.get_subjects()


def test_identical_schema_is_deduplicated_across_subjects(sr_client):
    text = 'syntax = "proto3";\npackage dedupe;\nmessage A { string x = 1; }\n'
    first = sr_client.register_schema("a-value", Schema(text, "PROTOBUF"))
    again = sr_client.register_schema("a-value", Schema(text, "PROTOBUF"))
    other = SchemaRegistryClient({"url": sr_client._rest_client.base_urls[0]}).register_schema(
        "b-value", Schema(text, "PROTOBUF")
    )
    assert first == again == other
    assert sr_client.get_versions("a-value") == [1]
    assert sr_client.get_versions("b-value") == [1]
    assert sorted((v.subject, v.version) for v in sr_client.get_schema_versions(first)) == [
        ("a-value", 1),
        ("b-value", 1),
    ]


def test_evolved_schema_gets_a_new_version_and_id(sr_client):
    v1 = 'syntax = "proto3";\npackage evo;\nmessage A { string x = 1; }\n'
    v2 = 'syntax = "proto3";\npackage evo;\nmessage A { string x = 1; int32 y = 2; }\n'
    id1 = sr_client.register_schema("evo-value", Schema(v1, "PROTOBUF"))
    id2 = sr_client.register_schema("evo-value", Schema(v2, "PROTOBUF"))
    assert id2 != id1
    assert sr_client.get_versions("evo-value") == [1, 2]
    latest = sr_client.get_latest_version("evo-value")
    assert (latest.version, latest.schema_id) == (2, id2)
    assert sr_client.get_version("evo-value", 1).schema_id == id1
    found = sr_client.lookup_schema("evo-value", Schema(v1, "PROTOBUF"))
    assert (found.version, found.schema_id) == (1, id1)


def test_text_format_compiles_back_to_the_registered_descriptor(registry, sr_client, proto_modules):
    common_pb2, orders_pb2 = proto_modules
    ProtobufSerializer(orders_pb2.Order, sr_client, {})(_order(orders_pb2), CTX)
    schema_id = sr_client.get_latest_version("infratest.orders-value").schema_id
    common_id = sr_client.get_latest_version("infratest/common.proto").schema_id

    text = sr_client.get_schema(schema_id).schema_str
    assert text.startswith('syntax = "proto3";')
    assert "map<string, int32> tags = 4;" in text
    common_text = SchemaRegistryClient({"url": registry.url}).get_schema(common_id).schema_str

    # Compile the rendered texts with protoc and compare with protoc's own descriptors.
    timestamp = descriptor_pb2.FileDescriptorProto()
    from google.protobuf import timestamp_pb2

    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    common = compile_proto_text(common_text, "infratest/common.proto", [timestamp])
    orders = compile_proto_text(text, "infratest/orders.proto", [timestamp, common])
    assert _without_json_names(common) == _file_proto(common_pb2)
    assert _without_json_names(orders) == _file_proto(orders_pb2)


def test_serialized_format_is_base64_file_descriptor(registry, proto_modules):
    _, orders_pb2 = proto_modules
    client = SchemaRegistryClient({"url": registry.url})
    ProtobufSerializer(orders_pb2.Order, client, {})(_order(orders_pb2), CTX)
    schema_id = client.get_latest_version("infratest.orders-value").schema_id

    fresh = SchemaRegistryClient({"url": registry.url})
    serialized = fresh.get_schema(schema_id, fmt="serialized").schema_str
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert fdp == _file_proto(orders_pb2)


def test_text_registration_is_compiled_for_serialized_format(registry, sr_client):
    base = 'syntax = "proto3";\npackage txt;\nmessage Base { string id = 1; }\n'
    main = 'syntax = "proto3";\npackage txt;\nimport "txt/base.proto";\nmessage M { txt.Base b = 1; }\n'
    sr_client.register_schema("txt/base.proto", Schema(base, "PROTOBUF"))
    ref = SchemaReference("txt/base.proto", "txt/base.proto", 1)
    schema_id = sr_client.register_schema("txt-value", Schema(main, "PROTOBUF", [ref]))

    text = sr_client.get_schema(schema_id).schema_str
    assert text == main  # text registrations answer as registered
    fresh = SchemaRegistryClient({"url": registry.url})
    fdp = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(fresh.get_schema(schema_id, fmt="serialized").schema_str)
    )
    assert list(fdp.dependency) == ["txt/base.proto"]
    assert fdp.message_type[0].field[0].type_name == ".txt.Base"


def test_not_found_errors_carry_confluent_codes(sr_client):
    sr_client.register_schema("present-value", Schema('{"type": "string"}', "AVRO"))
    cases = [
        (lambda: sr_client.get_latest_version("absent-value"), 404, 40401),
        (lambda: sr_client.get_version("present-value", 7), 404, 40402),
        (lambda: sr_client.get_schema(9999), 404, 40403),
        (lambda: sr_client.get_schema_by_guid("00000000-0000-4000-8000-000000000000"), 404, 40403),
        (
            lambda: sr_client.lookup_schema("present-value", Schema('{"type": "int"}', "AVRO")),
            404,
            40403,
        ),
    ]
    for call, status, code in cases:
        with pytest.raises(SchemaRegistryError) as info:
            call()
        assert (info.value.http_status_code, info.value.error_code) == (status, code)


def test_invalid_schemas_are_rejected_with_42201(sr_client):
    bad = [
        Schema('syntax = "proto3";\nmessage A { strin x = 1; }\n', "PROTOBUF"),
        Schema(
            'syntax = "proto3";\nimport "nope.proto";\nmessage A { nope.B b = 1; }\n', "PROTOBUF"
        ),
        Schema(
            'syntax = "proto3";\nmessage A { int32 x = 1; }\n',
            "PROTOBUF",
            [SchemaReference("missing.proto", "missing.proto", 1)],
        ),
        Schema("{not json", "AVRO"),
    ]
    for schema in bad:
        with pytest.raises(SchemaRegistryError) as info:
            sr_client.register_schema("bad-value", schema)
        assert (info.value.http_status_code, info.value.error_code) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as info:
        sr_client.get_latest_version("bad-value")
    assert info.value.error_code == 40401  # nothing half-registered


def test_protoc_message_names_the_problem(sr_client):
    with pytest.raises(SchemaRegistryError) as info:
        sr_client.register_schema(
            "bad-value", Schema('syntax = "proto3";\nmessage A { strin x = 1; }\n', "PROTOBUF")
        )
    assert '"strin" is not defined' in info.value.error_message


def test_guid_lookup_returns_the_same_schema(sr_client, registry):
    text = 'syntax = "proto3";\npackage g;\nmessage A { string x = 1; }\n'
    registered = sr_client.register_schema_full_response("g-value", Schema(text, "PROTOBUF"))
    assert registered.guid == registry.guid_of(registered.schema_id)
    fresh = SchemaRegistryClient({"url": registry.url})
    assert fresh.get_schema_by_guid(registered.guid).schema_str == text


def test_soft_then_permanent_delete(sr_client):
    schema_id = sr_client.register_schema("del-value", Schema('{"type": "string"}', "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        sr_client.delete_subject("del-value", permanent=True)
    assert info.value.error_code == 40405
    assert sr_client.delete_subject("del-value") == [1]
    assert "del-value" not in sr_client.get_subjects()
    assert "del-value" in sr_client.get_subjects(deleted=True)
    assert sr_client.get_schema(schema_id).schema_str == '{"type": "string"}'  # ids stay
    assert sr_client.delete_subject("del-value", permanent=True) == [1]
    assert "del-value" not in sr_client.get_subjects(deleted=True)


def test_compatibility_config_is_stored(sr_client):
    assert sr_client.get_compatibility() == "BACKWARD"
    # Confluent answers PUT /config with {"compatibility": ...}; the client passes it through.
    assert sr_client.set_compatibility(level="full") == {"compatibility": "FULL"}
    assert sr_client.get_compatibility() == "FULL"
    with pytest.raises(SchemaRegistryError) as info:
        sr_client.get_compatibility("s-value")
    assert info.value.error_code == 40408
    sr_client.set_compatibility("s-value", "NONE")
    assert sr_client.get_compatibility("s-value") == "NONE"


def test_basic_auth(caplog):
    handle = start_registry_server(users={"alice": "s3cret-pw"})
    try:
        anonymous = SchemaRegistryClient({"url": handle.url})
        with pytest.raises(SchemaRegistryError) as info:
            anonymous.get_subjects()
        assert info.value.http_status_code == 401
        wrong = SchemaRegistryClient({"url": handle.url, "basic.auth.user.info": "alice:nope"})
        with pytest.raises(SchemaRegistryError):
            wrong.get_subjects()
        with caplog.at_level("DEBUG"):
            good = SchemaRegistryClient(
                {"url": handle.url, "basic.auth.user.info": "alice:s3cret-pw"}
            )
            good.register_schema("auth-value", Schema('{"type": "string"}', "AVRO"))
            assert good.get_subjects() == ["auth-value"]
        assert "s3cret-pw" not in caplog.text
        assert "s3cret-pw" not in repr(handle)
    finally:
        handle.stop()


def test_client_retries_through_injected_503(registry):
    client = SchemaRegistryClient(
        {"url": registry.url, "max.retries": 3, "retries.wait.ms": 10, "retries.max.wait.ms": 20}
    )
    registry.fail_next(2)
    assert client.get_subjects() == []
    assert registry.requests.count(("GET", "/subjects")) == 3

    no_retry = SchemaRegistryClient({"url": registry.url, "max.retries": 0})
    registry.fail_next(1, status=503)
    with pytest.raises(SchemaRegistryError) as info:
        no_retry.get_subjects()
    assert (info.value.http_status_code, info.value.error_code) == (503, 50303)
