"""The schema-registry protocol the codec depends on, and the records it returns.

A `SchemaRegistry` answers three questions, as Confluent Schema Registry's REST API does:
the schema with a given id (`GET /schemas/ids/{id}`), with a given GUID
(`GET /schemas/guids/{guid}`), and the schema registered under a subject and version
(`GET /subjects/{subject}/versions/{version}`, used to follow references).

Implementations: `codec.http_registry.HttpSchemaRegistry` (a real registry over HTTP) and
`codec.directory_registry.DirectorySchemaRegistry` (a folder of .proto files, offline).
`open_registry` picks one from a URL or a path.

Raises (every implementation): `UnknownSchema` when the registry does not know the id, GUID,
subject or version; `RegistryUnavailable` when it cannot answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

#: `schemaType` when the registry omits it: Confluent's default, and the reason for NOT_PROTOBUF.
DEFAULT_SCHEMA_TYPE = "AVRO"


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """An import of a schema: `name` is the import path (`shop/common.proto`)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as a registry returns it.

    Attributes:
        schema: .proto text, or a base64 `FileDescriptorProto` when `format == "serialized"`.
        schema_type: "PROTOBUF", "AVRO" or "JSON".
        references: the schema's imports, each registered under a subject and version.
        format: "text" or "serialized", as detected from the answer.
        schema_id, schema_guid, subject, version: what the registry said about it, if anything.
    """

    schema: str
    schema_type: str = "PROTOBUF"
    references: tuple[SchemaReference, ...] = field(default=())
    format: Literal["text", "serialized"] = "text"
    schema_id: int | None = None
    schema_guid: str | None = None
    subject: str | None = None
    version: int | None = None


@runtime_checkable
class SchemaRegistry(Protocol):
    """What the codec needs from a schema registry."""

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema registered with this id."""
        ...

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        """The schema registered with this GUID (lowercase 8-4-4-4-12)."""
        ...

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        """The schema registered under `subject` at `version` (to resolve a reference)."""
        ...

    def close(self) -> None:
        """Release connections; the registry may not be used afterwards."""
        ...
