"""Descriptor -> columns: each knows its Spark type, its Arrow type, and how to build its array.

Everything here runs once per (descriptor, max_depth): the walk over the descriptor decides
every type and precomputes, per field, a closure that turns a list of parent messages into one
Arrow array. The closures are the executors' hot path, so they are column-wise: one C-level
``map(attrgetter)`` (or ``methodcaller``) pass per field over the whole batch, one
``pa.array`` per leaf, nested messages recursing on the list of sub-messages; no per-record
dicts, no ``MessageToDict``. docs/type-mapping.md is the table of the rules below.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.proto_types._json import to_json_text
from pipelines.proto_types._time import (
    ARROW_TIMESTAMP,
    build_duration,
    build_timestamp,
    null_mask,
)

FD = FieldDescriptor

# Builds one array from the values of one kind. ``present`` is None when every value is set,
# else one bool per value; where it is False the value is a default instance or default
# scalar to be ignored (the array gets a null there).
Build = Callable[[list[Any], "list[bool] | None"], pa.Array]
# Builds one column from the list of parent messages.
Extract = Callable[[list[Message]], pa.Array]

UINT64_DECIMAL = DecimalType(20, 0)
ARROW_UINT64_DECIMAL = pa.decimal128(20, 0)


@dataclass(frozen=True)
class Kind:
    """How one protobuf value (a singular field, a list element, a map key or value) maps."""

    spark: DataType
    arrow: pa.DataType
    build: Build


@dataclass(frozen=True)
class Column:
    """One column of a message's struct."""

    name: str
    spark_field: StructField
    arrow_field: pa.Field
    extract: Extract


def _plain(arrow_type: pa.DataType) -> Build:
    def build(values: list[Any], present: list[bool] | None) -> pa.Array:
        return pa.array(values, type=arrow_type, mask=null_mask(present))

    return build


def _build_uint64(values: list[Any], present: list[bool] | None) -> pa.Array:
    # Arrow's cast from uint64 is exact; going through int64 would wrap 2**64-1 to -1.
    return pa.array(values, type=pa.uint64(), mask=null_mask(present)).cast(ARROW_UINT64_DECIMAL)


_INT = Kind(IntegerType(), pa.int32(), _plain(pa.int32()))
_LONG = Kind(LongType(), pa.int64(), _plain(pa.int64()))
_UINT64 = Kind(UINT64_DECIMAL, ARROW_UINT64_DECIMAL, _build_uint64)
_FLOAT = Kind(FloatType(), pa.float32(), _plain(pa.float32()))
_DOUBLE = Kind(DoubleType(), pa.float64(), _plain(pa.float64()))
_BOOL = Kind(BooleanType(), pa.bool_(), _plain(pa.bool_()))
_STRING = Kind(StringType(), pa.string(), _plain(pa.string()))
_BINARY = Kind(BinaryType(), pa.binary(), _plain(pa.binary()))

SCALAR_KINDS: dict[int, Kind] = {
    FD.TYPE_INT32: _INT,
    FD.TYPE_SINT32: _INT,
    FD.TYPE_SFIXED32: _INT,
    FD.TYPE_INT64: _LONG,
    FD.TYPE_SINT64: _LONG,
    FD.TYPE_SFIXED64: _LONG,
    # uint32 does not fit Spark's signed int; bigint holds every value.
    FD.TYPE_UINT32: _LONG,
    FD.TYPE_FIXED32: _LONG,
    FD.TYPE_UINT64: _UINT64,
    FD.TYPE_FIXED64: _UINT64,
    FD.TYPE_FLOAT: _FLOAT,
    FD.TYPE_DOUBLE: _DOUBLE,
    FD.TYPE_BOOL: _BOOL,
    FD.TYPE_STRING: _STRING,
    FD.TYPE_BYTES: _BINARY,
}


class _EnumNames(dict[Any, Any]):
    """Number -> name; an unknown number (open enums) maps to its decimal text."""

    def __missing__(self, number: int) -> str:
        return str(number)


def _enum_kind(enum: EnumDescriptor) -> Kind:
    names = _EnumNames()
    for value in enum.values:
        # With allow_alias several names share a number: the first declared wins, as in
        # protobuf's own JSON and text output.
        names.setdefault(value.number, value.name)
    lookup = names.__getitem__

    def build(values: list[Any], present: list[bool] | None) -> pa.Array:
        return pa.array(list(map(lookup, values)), type=pa.string(), mask=null_mask(present))

    return Kind(StringType(), pa.string(), build)


_VALUE = operator.attrgetter("value")


def _build_json(values: list[Any], present: list[bool] | None) -> pa.Array:
    texts: list[str | None]
    if present is None:
        texts = [to_json_text(m) for m in values]
    else:
        texts = [to_json_text(m) if p else None for m, p in zip(values, present, strict=True)]
    return pa.array(texts, type=pa.string())


def _wrapper(inner: Kind) -> Kind:
    def build(values: list[Any], present: list[bool] | None) -> pa.Array:
        return inner.build(list(map(_VALUE, values)), present)

    return Kind(inner.spark, inner.arrow, build)


JSON_KIND = Kind(StringType(), pa.string(), _build_json)

WELL_KNOWN_KINDS: dict[str, Kind] = {
    "google.protobuf.Timestamp": Kind(TimestampType(), ARROW_TIMESTAMP, build_timestamp),
    # Spark's DayTimeIntervalType arrives through mapInArrow (pa.duration("us")), but Delta
    # rejects interval columns (UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE) and the Delta protocol
    # has no interval type, so a Duration is a double of seconds.
    "google.protobuf.Duration": Kind(DoubleType(), pa.float64(), build_duration),
    "google.protobuf.DoubleValue": _wrapper(_DOUBLE),
    "google.protobuf.FloatValue": _wrapper(_FLOAT),
    "google.protobuf.Int64Value": _wrapper(_LONG),
    "google.protobuf.UInt64Value": _wrapper(_UINT64),
    "google.protobuf.Int32Value": _wrapper(_INT),
    "google.protobuf.UInt32Value": _wrapper(_LONG),
    "google.protobuf.BoolValue": _wrapper(_BOOL),
    "google.protobuf.StringValue": _wrapper(_STRING),
    "google.protobuf.BytesValue": _wrapper(_BINARY),
    "google.protobuf.Struct": JSON_KIND,
    "google.protobuf.Value": JSON_KIND,
    "google.protobuf.ListValue": JSON_KIND,
    "google.protobuf.Any": JSON_KIND,
}


def _struct_kind(columns: list[Column]) -> Kind:
    spark = StructType([c.spark_field for c in columns])
    fields = [c.arrow_field for c in columns]
    extracts = [c.extract for c in columns]

    def build(values: list[Any], present: list[bool] | None) -> pa.Array:
        children = [extract(values) for extract in extracts]
        return pa.StructArray.from_arrays(children, fields=fields, mask=null_mask(present))

    return Kind(spark, pa.struct(fields), build)


def _singular(field: FieldDescriptor, kind: Kind) -> Extract:
    getter = operator.attrgetter(field.name)
    build = kind.build
    if not field.has_presence:
        # Implicit presence (proto3 scalars): the value read is protobuf's default when unset.
        def extract_implicit(parents: list[Message]) -> pa.Array:
            return build(list(map(getter, parents)), None)

        return extract_implicit

    has = operator.methodcaller("HasField", field.name)
    arrow = kind.arrow

    def extract(parents: list[Message]) -> pa.Array:
        present = list(map(has, parents))
        if not any(present):
            return pa.nulls(len(parents), arrow)
        # Unset message fields read as default instances, so the builders see no None.
        return build(list(map(getter, parents)), None if all(present) else present)

    return extract


def _repeated(field: FieldDescriptor, kind: Kind, list_type: pa.DataType) -> Extract:
    getter = operator.attrgetter(field.name)
    build = kind.build

    def extract(parents: list[Message]) -> pa.Array:
        seqs = list(map(getter, parents))
        offsets = pa.array(list(accumulate(map(len, seqs), initial=0)), pa.int32())
        values = build(list(chain.from_iterable(seqs)), None)
        return pa.ListArray.from_arrays(offsets, values, type=list_type)

    return extract


def _map(field: FieldDescriptor, key: Kind, value: Kind, map_type: pa.DataType) -> Extract:
    getter = operator.attrgetter(field.name)
    build_key = key.build
    build_value = value.build
    getitem = operator.getitem

    def extract(parents: list[Message]) -> pa.Array:
        maps = list(map(getter, parents))
        lengths = list(map(len, maps))
        offsets = pa.array(list(accumulate(lengths, initial=0)), pa.int32())
        # Iterating a map container yields its keys in C; ``items()`` is the pure-Python
        # Mapping mixin and costs three times as much. Each value is then looked up in its
        # own map (``owners`` repeats each map once per key).
        keys = list(chain.from_iterable(maps))
        owners = chain.from_iterable(map(repeat, maps, lengths))
        values = list(map(getitem, owners, keys))
        return pa.MapArray.from_arrays(
            offsets, build_key(keys, None), build_value(values, None), type=map_type
        )

    return extract


def _oneof_case(oneof_name: str) -> Extract:
    which = operator.methodcaller("WhichOneof", oneof_name)

    def extract(parents: list[Message]) -> pa.Array:
        return pa.array(list(map(which, parents)), type=pa.string())

    return extract


def _is_map(field: FieldDescriptor) -> bool:
    return (
        field.is_repeated
        and field.type == FD.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


def _synthetic_oneofs(message: Descriptor) -> set[int]:
    """Indexes of the oneofs protoc made for proto3 ``optional`` fields (no case column).

    upb's descriptors do not expose ``proto3_optional``; the DescriptorProto does.
    """
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    return {f.oneof_index for f in proto.field if f.proto3_optional}


def column_names(message: Descriptor) -> tuple[dict[str, str], dict[str, str]]:
    """Column names of ``message``'s fields and of its oneofs' case columns.

    Spark and Delta compare column names case-insensitively, so a name is taken when any
    casing of it is. Fields claim names first, lowest field number first: a field keeps its
    own name unless a lower-numbered field's name differs from it only in case, in which case
    it is ``<name>_<number>``. Then each real oneof, in declaration order, claims
    ``<oneof>_case``. Any name still taken gets ``_`` appended until it is free.

    Returns:
        (field name -> column name, oneof name -> case column name)
    """
    taken: set[str] = set()

    def claim(name: str) -> str:
        while name.lower() in taken:
            name += "_"
        taken.add(name.lower())
        return name

    fields: dict[str, str] = {}
    for field in sorted(message.fields, key=lambda f: f.number):
        name = field.name
        if name.lower() in taken:
            name = f"{name}_{field.number}"
        fields[field.name] = claim(name)
    synthetic = _synthetic_oneofs(message)
    cases = {
        oneof.name: claim(f"{oneof.name}_case")
        for oneof in message.oneofs
        if oneof.index not in synthetic
    }
    return fields, cases


class Planner:
    """Walks a descriptor once and produces the columns of its struct.

    ``max_depth`` bounds recursion: a message type may occur at most ``max_depth`` times on
    the path from the root (the root counts once); a field that would nest it once more is
    a JSON text column instead (each element of a repeated field, each value of a map).
    """

    def __init__(self, max_depth: int, comments: Mapping[str, str]) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        self.max_depth = max_depth
        self.comments = comments

    def columns(self, message: Descriptor, seen: Mapping[str, int]) -> list[Column]:
        """The columns of ``message``; ``seen`` counts each type on the path, ``message`` included."""
        field_names, case_names = column_names(message)
        last_member: dict[str, str] = {}
        for field in message.fields:
            oneof = field.containing_oneof
            if oneof is not None and oneof.name in case_names:
                last_member[oneof.name] = field.name
        columns: list[Column] = []
        for field in message.fields:
            columns.append(self._field_column(field, field_names[field.name], seen))
            oneof = field.containing_oneof
            if oneof is not None and last_member.get(oneof.name) == field.name:
                name = case_names[oneof.name]
                comment = self.comments.get(oneof.full_name)
                columns.append(
                    Column(
                        name,
                        _spark_field(name, StringType(), comment),
                        pa.field(name, pa.string()),
                        _oneof_case(oneof.name),
                    )
                )
        return columns

    def _field_column(self, field: FieldDescriptor, name: str, seen: Mapping[str, int]) -> Column:
        if _is_map(field):
            entry = field.message_type
            key = self._element_kind(entry.fields_by_name["key"], seen)
            value = self._element_kind(entry.fields_by_name["value"], seen)
            spark: DataType = MapType(key.spark, value.spark, valueContainsNull=True)
            arrow: pa.DataType = pa.map_(key.arrow, value.arrow)
            extract = _map(field, key, value, arrow)
        elif field.is_repeated:
            element = self._element_kind(field, seen)
            spark = ArrayType(element.spark, containsNull=True)
            arrow = pa.list_(element.arrow)
            extract = _repeated(field, element, arrow)
        else:
            kind = self._element_kind(field, seen)
            spark, arrow = kind.spark, kind.arrow
            extract = _singular(field, kind)
        comment = self.comments.get(field.full_name)
        return Column(name, _spark_field(name, spark, comment), pa.field(name, arrow), extract)

    def _element_kind(self, field: FieldDescriptor, seen: Mapping[str, int]) -> Kind:
        if field.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            return self.message_kind(field.message_type, seen)
        if field.type == FD.TYPE_ENUM:
            return _enum_kind(field.enum_type)
        return SCALAR_KINDS[field.type]

    def message_kind(self, message: Descriptor, seen: Mapping[str, int]) -> Kind:
        """The kind of a field of type ``message`` under a path that has ``seen``."""
        special = WELL_KNOWN_KINDS.get(message.full_name)
        if special is not None:
            return special
        count = seen.get(message.full_name, 0)
        if count >= self.max_depth:
            return JSON_KIND
        columns = self.columns(message, {**seen, message.full_name: count + 1})
        if not columns:
            # Parquet cannot store a struct without fields (google.protobuf.Empty, or any
            # message without fields): such a message is JSON text, "{}" when set.
            return JSON_KIND
        return _struct_kind(columns)


def _spark_field(name: str, data_type: DataType, comment: str | None) -> StructField:
    # Every column is nullable: Delta cannot add a non-nullable column to an existing table.
    metadata = {"comment": comment} if comment else {}
    return StructField(name, data_type, nullable=True, metadata=metadata)
