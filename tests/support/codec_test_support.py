"""Helpers for the codec tests: compile .proto text to Python modules, and drive
confluent-kafka's real ProtobufSerializer/Deserializer against its mock registry.

Generated modules land in protobuf's default descriptor pool, where two files with one
name or one package clash: every test file uses its own proto package names.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from codec.errors import UnknownSchema
from codec.http_answers import detect_schema_format
from codec.protoc import generate_python
from codec.registry import RegisteredSchema, SchemaReference


def compile_protos(protos: dict[str, str], out_dir: Path) -> None:
    """Write `protos` (name -> text) under out_dir and generate *_pb2.py modules there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in protos.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    generate_python(out_dir, list(protos), out_dir)
    if str(out_dir) not in sys.path:
        sys.path.insert(0, str(out_dir))
    importlib.invalidate_caches()


def import_generated(proto_name: str) -> Any:
    """Import the module generated for `proto_name` ("shop/order.proto" -> shop.order_pb2)."""
    return importlib.import_module(proto_name[: -len(".proto")].replace("/", ".") + "_pb2")


def new_mock_client() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": "mock://"})


def _to_registered(schema: Any, **extra: Any) -> RegisteredSchema:
    text = schema.schema_str
    schema_type = schema.schema_type or "AVRO"
    return RegisteredSchema(
        schema=text,
        schema_type=schema_type,
        references=tuple(
            SchemaReference(r.name, r.subject, r.version) for r in schema.references or ()
        ),
        format="serialized" if detect_schema_format(text) == "serialized" else "text",
        **extra,
    )


class ConfluentMockRegistry:
    """The codec's SchemaRegistry protocol over confluent-kafka's mock registry client."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client
        self.calls: list[tuple[str, object]] = []

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        self.calls.append(("id", schema_id))
        try:
            schema = self.client.get_schema(schema_id)
        except Exception as exc:  # the mock raises SchemaRegistryError(404, 40403)
            raise UnknownSchema(str(exc), schema_id=schema_id, registry_error_code=40403) from None
        return _to_registered(schema, schema_id=schema_id)

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        self.calls.append(("guid", schema_guid))
        try:
            schema = self.client.get_schema_by_guid(schema_guid)
        except Exception as exc:
            raise UnknownSchema(
                str(exc), schema_guid=schema_guid, registry_error_code=40403
            ) from None
        return _to_registered(schema, schema_guid=schema_guid)

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        self.calls.append(("subject", (subject, version)))
        try:
            registered = self.client.get_version(subject, version)
        except Exception as exc:
            raise UnknownSchema(str(exc), registry_error_code=40402) from None
        return _to_registered(registered.schema, subject=subject, version=version)

    def close(self) -> None:
        pass


def confluent_frame(
    client: SchemaRegistryClient,
    message: Any,
    topic: str,
    *,
    header_form: bool = False,
    is_key: bool = False,
    conf: dict[str, Any] | None = None,
) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Serialize `message` with confluent-kafka's ProtobufSerializer; return (value, headers)."""
    config = {"auto.register.schemas": True, **(conf or {})}
    if header_form:
        config["schema.id.serializer"] = header_schema_id_serializer
    serializer = ProtobufSerializer(type(message), client, config)
    headers: list[tuple[str, bytes]] = []
    field = MessageField.KEY if is_key else MessageField.VALUE
    value = serializer(message, SerializationContext(topic, field, headers))
    return value, headers


def confluent_decode(
    client: SchemaRegistryClient,
    message_class: Any,
    value: bytes,
    topic: str,
    headers: list[tuple[str, bytes]] | None = None,
) -> Any:
    """Deserialize with confluent-kafka's ProtobufDeserializer (the reference reader)."""
    deserializer = ProtobufDeserializer(message_class, {}, client)
    return deserializer(value, SerializationContext(topic, MessageField.VALUE, headers))


class MemoryRegistry:
    """A SchemaRegistry over dicts, for tests that need exact control of what is served."""

    def __init__(self) -> None:
        self.by_id: dict[int, RegisteredSchema] = {}
        self.by_guid: dict[str, RegisteredSchema] = {}
        self.versions: dict[tuple[str, int], RegisteredSchema] = {}
        self.calls: list[tuple[str, object]] = []

    def add(self, schema_id: int, schema: RegisteredSchema, guid: str | None = None) -> None:
        self.by_id[schema_id] = schema
        if guid:
            self.by_guid[guid] = schema

    def add_version(self, subject: str, version: int, schema: RegisteredSchema) -> None:
        self.versions[(subject, version)] = schema

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        self.calls.append(("id", schema_id))
        if schema_id not in self.by_id:
            raise UnknownSchema(f"no schema {schema_id}", registry_error_code=40403)
        return self.by_id[schema_id]

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        self.calls.append(("guid", schema_guid))
        if schema_guid not in self.by_guid:
            raise UnknownSchema(f"no schema {schema_guid}", registry_error_code=40403)
        return self.by_guid[schema_guid]

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        self.calls.append(("subject", (subject, version)))
        if (subject, version) not in self.versions:
            raise UnknownSchema(f"no {subject} v{version}", registry_error_code=40402)
        return self.versions[(subject, version)]

    def close(self) -> None:
        pass
