"""A Confluent registry's JSON answer as a `RegisteredSchema`.

An answer is `{"schema": str, "schemaType"?: str, "references"?: [{"name", "subject",
"version"}], "id"?, "guid"?, "subject"?, "version"?}` (Confluent Schema Registry API
reference). A Protobuf schema is either .proto text or, when asked with `?format=serialized`,
a base64 `FileDescriptorProto`: which one came back is detected from the text
(`detect_schema_format`). An answer without a schema string or with malformed references is the
registry's fault, not the record's: `RegistryUnavailable` (fail the batch, never quarantine).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from .errors import RegistryUnavailable
from .registry import DEFAULT_SCHEMA_TYPE, RegisteredSchema, SchemaReference

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def detect_schema_format(schema: str) -> str:
    """Return "serialized" when `schema` is a base64 `FileDescriptorProto`, else "text"."""
    if not schema or not _BASE64.fullmatch(schema):
        return "text"  # .proto text always has spaces, quotes or semicolons
    try:
        descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return "text"
    return "serialized"


def to_registered_schema(
    body: Any, *, schema_id: int | None, schema_guid: str | None
) -> RegisteredSchema:
    """The schema of an answer; the id or GUID asked for fill in what the answer leaves out."""
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise RegistryUnavailable(
            "registry answered without a 'schema' string", schema_id=schema_id
        )
    schema_type = body.get("schemaType") or DEFAULT_SCHEMA_TYPE
    references = _references(body, schema_id=schema_id, schema_guid=schema_guid)
    text = body["schema"]
    fmt = detect_schema_format(text) if schema_type == "PROTOBUF" else "text"
    version = body.get("version")
    return RegisteredSchema(
        schema=text,
        schema_type=str(schema_type),
        references=references,
        format="serialized" if fmt == "serialized" else "text",
        schema_id=body.get("id", schema_id),
        schema_guid=body.get("guid", schema_guid),
        subject=body.get("subject"),
        version=version if isinstance(version, int) else None,
    )


def _references(
    body: dict[str, Any], *, schema_id: int | None, schema_guid: str | None
) -> tuple[SchemaReference, ...]:
    try:
        return tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in body.get("references") or ()
        )
    except (KeyError, TypeError, ValueError):
        raise RegistryUnavailable(
            "registry answered with malformed references (each needs a name, a subject "
            "and a version number)",
            schema_id=schema_id,
            schema_guid=schema_guid,
        ) from None
