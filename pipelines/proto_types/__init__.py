"""Protobuf message types as Spark/Arrow schemas, and decoded messages as Arrow rows.

Contract (docs/type-mapping.md has the full table and the reasons):

- ``spark_schema_for(descriptor, max_depth=3)`` -> ``StructType``: one column per field, named
  as the field (collisions resolved as :func:`column_names` documents), plus a string column
  ``<oneof>_case`` per real oneof; every column nullable; column comments (StructField
  metadata ``{"comment": ...}``) from the .proto comments when the FileDescriptorSet with
  source info is passed (upb descriptors carry no comments).
- ``RowConverter(descriptor, max_depth=3)``: ``.arrow_schema`` (matches the Spark schema under
  mapInArrow), ``.to_record_batch(messages)`` (the executors' fast path), ``.to_row(message)``.
- Scalars: int32/sint32/sfixed32 -> int; int64/sint64/sfixed64, uint32/fixed32 -> bigint;
  uint64/fixed64 -> decimal(20,0); float, double, bool, string; bytes -> binary;
  enum -> the value's name, an unknown number as its decimal text. Presence: proto3
  implicit scalars give protobuf's default when unset, fields with presence (proto2,
  proto3 ``optional``, oneof members, messages) give null when unset.
- repeated -> array, map -> map, message -> struct (null when unset); Timestamp -> timestamp
  (UTC, microseconds); Duration -> double seconds; wrappers -> nullable scalars;
  Struct/Value/ListValue/Any -> JSON text (:func:`to_json_text`); a message type nested in
  itself more than ``max_depth`` times -> JSON text at that level.
- ``native_decoder(descriptor, arrow_schema, max_depth)``: the compiled fast path
  (``wire2arrow.c``): payload bytes straight to the same Arrow columns, records it cannot
  take given back to the upb path; None when the type has no plan or no C compiler exists.
- ``schemas_compatible(old, new)`` -> (merged, None) when ``new`` only adds fields, else
  (None, reason naming the first conflicting column path).

Errors: :class:`RowConversionError` (a ValueError) when a message cannot become a row, with
the index of the first bad message, so the caller can quarantine it and keep the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from pyspark.sql.types import StructType

from pipelines.proto_types._comments import field_comments, message_comment
from pipelines.proto_types._converter import (
    RowConversionError,
    RowConverter,
    converter_for,
)
from pipelines.proto_types._evolution import schemas_compatible
from pipelines.proto_types._json import to_json_text
from pipelines.proto_types._native import NativeDecoder, native_decoder
from pipelines.proto_types._plan import column_names

__all__ = [
    "NativeDecoder",
    "RowConversionError",
    "RowConverter",
    "arrow_schema_for",
    "column_names",
    "converter_for",
    "field_comments",
    "message_comment",
    "native_decoder",
    "schemas_compatible",
    "spark_schema_for",
    "to_json_text",
]


def spark_schema_for(
    descriptor: Descriptor,
    max_depth: int = 3,
    *,
    file_descriptor_set: bytes | descriptor_pb2.FileDescriptorSet | None = None,
    comments: Mapping[str, str] | None = None,
) -> StructType:
    """The Spark schema of a message type's silver columns (see :class:`RowConverter`)."""
    return RowConverter(
        descriptor, max_depth, file_descriptor_set=file_descriptor_set, comments=comments
    ).spark_schema


def arrow_schema_for(descriptor: Descriptor, max_depth: int = 3) -> pa.Schema:
    """The Arrow schema :meth:`RowConverter.to_record_batch` produces for a message type."""
    return RowConverter(descriptor, max_depth).arrow_schema
