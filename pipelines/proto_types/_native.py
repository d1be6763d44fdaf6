"""The compiled fast path: protobuf payload bytes straight to Arrow columns (``wire2arrow.c``).

:class:`RowConverter` needs parsed upb messages and reads every field value through a Python
attribute access; on a realistic message that is most of the silver job's CPU. This module
plans the same columns as ``_plan`` for the C decoder in ``wire2arrow.c``, which reads the
wire format once and fills column buffers; the result is the same Arrow record batch.

- Exactness: the C decoder handles the canonical encoding and gives back, per record,
  anything else (an unknown field, a singular message written twice, a repeated map key,
  bad UTF-8, a truncated buffer, ...). :meth:`NativeDecoder.decode` reports those records and
  the caller decodes them with the upb path (``codec.decode_payloads`` + ``RowConverter``),
  which decides what they are. Map entries come out in wire order (the upb path gives upb's
  order; protobuf maps have none).
- Coverage: a message type whose columns include something the C decoder does not build
  (JSON-text columns: Struct, Value, ListValue, Any, Empty, types nested beyond
  ``max_depth``; groups; more than 512 fields in one message) has no plan: :func:`native_decoder` returns None
  and the upb path does all of it.
- Building: :mod:`pipelines.proto_types._library` compiles and loads ``wire2arrow.c`` once
  per process; without a compiler, or with ``PROTOLAKE_NATIVE=0``, the upb path runs.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pipelines.proto_types._library import library
from pipelines.proto_types._plan import (
    ARROW_UINT64_DECIMAL,
    WELL_KNOWN_KINDS,
    _EnumNames,
    _is_map,
    _synthetic_oneofs,
    column_names,
)

log = logging.getLogger(__name__)
FD = FieldDescriptor

# Keep in step with wire2arrow.c.
B_I32, B_I64, B_F32, B_F64, B_BOOL, B_BIN, B_STRUCT, B_LIST = range(1, 9)
L_IMPLICIT, L_PRESENCE, L_REPEATED, L_MAP, L_REQUIRED = range(5)
K_ENUM, K_MESSAGE, K_TIMESTAMP, K_DURATION, K_WRAPPER = 16, 17, 18, 19, 32
_MAX_FIELDS = 512

# protobuf type -> (C kind, builder type)
_SCALARS: dict[int, tuple[int, int]] = {
    FD.TYPE_INT32: (1, B_I32),
    FD.TYPE_INT64: (2, B_I64),
    FD.TYPE_UINT32: (3, B_I64),
    FD.TYPE_UINT64: (4, B_I64),
    FD.TYPE_SINT32: (5, B_I32),
    FD.TYPE_SINT64: (6, B_I64),
    FD.TYPE_FIXED32: (7, B_I64),
    FD.TYPE_SFIXED32: (8, B_I32),
    FD.TYPE_FIXED64: (9, B_I64),
    FD.TYPE_SFIXED64: (10, B_I64),
    FD.TYPE_FLOAT: (11, B_F32),
    FD.TYPE_DOUBLE: (12, B_F64),
    FD.TYPE_BOOL: (13, B_BOOL),
    FD.TYPE_STRING: (14, B_BIN),
    FD.TYPE_BYTES: (15, B_BIN),
    FD.TYPE_ENUM: (16, B_I32),
}
_UINT64_KINDS = {4, 9, K_WRAPPER + 4}
_BOOL_KINDS = {13, K_WRAPPER + 13}
_WRAPPED = {
    "google.protobuf.DoubleValue": FD.TYPE_DOUBLE,
    "google.protobuf.FloatValue": FD.TYPE_FLOAT,
    "google.protobuf.Int64Value": FD.TYPE_INT64,
    "google.protobuf.UInt64Value": FD.TYPE_UINT64,
    "google.protobuf.Int32Value": FD.TYPE_INT32,
    "google.protobuf.UInt32Value": FD.TYPE_UINT32,
    "google.protobuf.BoolValue": FD.TYPE_BOOL,
    "google.protobuf.StringValue": FD.TYPE_STRING,
    "google.protobuf.BytesValue": FD.TYPE_BYTES,
}


class UnsupportedTypeError(Exception):
    """The message type has a column the C decoder does not build (the upb path does)."""


# ----------------------------------------------------------------------------- the plan


@dataclass
class _Out:
    """How one builder's buffers become an Arrow array."""

    builder: int
    arrow: pa.DataType
    convert: str = "plain"  # plain | uint64 | enum | case | bool
    names: Any = None  # enum: number -> name; case: position -> member name
    children: list[_Out] = field(default_factory=list)
    elem: _Out | None = None  # list element, map key
    elem2: _Out | None = None  # map value


class _PlanBuilder:
    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.msgs: list[list[int]] = []
        self.fields: list[list[int]] = []
        self.cases: list[int] = []
        self.btypes: list[int] = []
        self.enums: list[int] = []
        self._enum_at: dict[str, tuple[int, int]] = {}

    def builder(self, btype: int) -> int:
        self.btypes.append(btype)
        return len(self.btypes) - 1

    def message(self, desc: Descriptor, arrow: pa.StructType, seen: dict[str, int]) -> int:
        """Plans ``desc`` (whose columns are ``arrow``'s fields); returns its message id."""
        if len(desc.fields) > _MAX_FIELDS or len(desc.oneofs) > _MAX_FIELDS:
            raise UnsupportedTypeError(f"{desc.full_name} has more than {_MAX_FIELDS} fields")
        m = len(self.msgs)
        self.msgs.append([0, 0, 0, 0])
        field_names, case_names = column_names(desc)
        synthetic = _synthetic_oneofs(desc)
        real = [o for o in desc.oneofs if o.index not in synthetic]
        oneof_pos = {o.name: k for k, o in enumerate(real)}
        rows: list[list[int]] = []
        for fd in desc.fields:
            arrow_field = arrow.field(field_names[fd.name])
            rows.append(self.field(fd, arrow_field.type, seen, oneof_pos))
        case_first = len(self.cases)
        self.cases.extend(self.builder(B_I32) for _ in real)
        first = len(self.fields)
        self.fields.extend(rows)
        self.msgs[m] = [first, len(rows), len(real), case_first]
        return m

    def field(
        self,
        fd: FieldDescriptor,
        arrow: pa.DataType,
        seen: dict[str, int],
        oneof_pos: dict[str, int],
    ) -> list[int]:
        if fd.type == FD.TYPE_GROUP:
            raise UnsupportedTypeError(f"{fd.full_name} is a group")
        # An explicit default needs presence, and a field with presence is null when unset:
        # defaults never reach a column (map entries, whose values are defaulted, have none).
        oneof = fd.containing_oneof
        o = oneof_pos.get(oneof.name, -1) if oneof is not None else -1
        position = list(oneof.fields).index(fd) if o >= 0 else 0
        if _is_map(fd):
            entry = fd.message_type
            key_kind, key_b = self.element(entry.fields_by_name["key"], arrow.key_type, seen)
            val_kind, val_b, sub = self.element_full(
                entry.fields_by_name["value"], arrow.item_type, seen
            )
            b = self.builder(B_LIST)
            enum = self.closed_enum(entry.fields_by_name["value"])
            return [fd.number, key_kind, L_MAP, -1, b, key_b, sub, val_kind, val_b, 0, *enum]
        if fd.is_repeated:
            kind, elem, sub = self.element_full(fd, arrow.value_type, seen)
            b = self.builder(B_LIST)
            return [fd.number, kind, L_REPEATED, -1, b, elem, sub, 0, -1, 0, *self.closed_enum(fd)]
        kind, b, sub = self.element_full(fd, arrow, seen)
        if fd.is_required:
            label = L_REQUIRED  # a record without it is given back: protobuf decides
        else:
            label = L_PRESENCE if fd.has_presence else L_IMPLICIT
        return [fd.number, kind, label, o, b, -1, sub, 0, -1, position, *self.closed_enum(fd)]

    def closed_enum(self, fd: FieldDescriptor) -> tuple[int, int]:
        """(first, count) of the closed enum's numbers in ``enums``; (0, 0) if none."""
        if fd.type != FD.TYPE_ENUM or not fd.enum_type.is_closed:
            return (0, 0)
        name = fd.enum_type.full_name
        if name not in self._enum_at:
            numbers = sorted({v.number for v in fd.enum_type.values})
            self._enum_at[name] = (len(self.enums), len(numbers))
            self.enums.extend(numbers)
        return self._enum_at[name]

    def element(
        self, fd: FieldDescriptor, arrow: pa.DataType, seen: dict[str, int]
    ) -> tuple[int, int]:
        kind, b, _ = self.element_full(fd, arrow, seen)
        return kind, b

    def element_full(
        self, fd: FieldDescriptor, arrow: pa.DataType, seen: dict[str, int]
    ) -> tuple[int, int, int]:
        """(C kind, builder of one value, sub-message id or -1) for one value of ``fd``."""
        if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            name = fd.message_type.full_name
            if name == "google.protobuf.Timestamp":
                return K_TIMESTAMP, self.builder(B_I64), -1
            if name == "google.protobuf.Duration":
                return K_DURATION, self.builder(B_F64), -1
            if name in _WRAPPED:
                inner, btype = _SCALARS[_WRAPPED[name]]
                return K_WRAPPER + inner, self.builder(btype), -1
            if name in WELL_KNOWN_KINDS or not pa.types.is_struct(arrow):
                raise UnsupportedTypeError(f"{fd.full_name}: {name} is not a plain struct column")
            count = seen.get(name, 0)
            sub = self.message(fd.message_type, arrow, {**seen, name: count + 1})
            return K_MESSAGE, self.builder(B_STRUCT), sub
        kind, btype = _SCALARS[fd.type]
        return kind, self.builder(btype), -1


def _validity(raw: bytes, n: int) -> pa.Buffer | None:
    if n == 0 or raw.count(1) == n:
        return None
    bits = np.packbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    return pa.py_buffer(bits.tobytes())


class NativeDecoder:
    """Decodes payloads of one message type with the C decoder into ``arrow_schema`` batches."""

    def __init__(
        self, lib: ctypes.CDLL, descriptor: Descriptor, arrow_schema: pa.Schema, max_depth: int
    ) -> None:
        self._lib = lib
        planner = _PlanBuilder(max_depth)
        root_type = pa.struct(list(arrow_schema))
        planner.message(descriptor, root_type, {descriptor.full_name: 1})
        self.arrow_schema = arrow_schema
        self._btypes = planner.btypes
        self._outs = self._describe_message(planner, 0, descriptor, root_type)
        arrays = {
            name: np.asarray(values, dtype=np.int32).ravel()
            for name, values in (
                ("msgs", planner.msgs),
                ("fields", planner.fields),
                ("cases", planner.cases),
                ("btypes", planner.btypes),
                ("enums", planner.enums),
            )
        }
        handle = lib.w2a_plan_new(
            len(planner.msgs),
            arrays["msgs"].ctypes.data,
            len(planner.fields),
            arrays["fields"].ctypes.data,
            len(planner.cases),
            arrays["cases"].ctypes.data,
            len(planner.btypes),
            arrays["btypes"].ctypes.data,
            len(planner.enums),
            arrays["enums"].ctypes.data,
        )
        if not handle:
            raise UnsupportedTypeError(f"{descriptor.full_name}: the C decoder refused the plan")
        self._plan = handle

    def __del__(self) -> None:
        plan = getattr(self, "_plan", None)
        if plan:
            self._lib.w2a_plan_free(plan)

    # The Arrow side of the plan, in column order.
    def _describe_message(
        self, planner: _PlanBuilder, m: int, desc: Descriptor, arrow: pa.StructType
    ) -> list[_Out]:
        first, _, _, case_first = planner.msgs[m]
        field_names, case_names = column_names(desc)
        synthetic = _synthetic_oneofs(desc)
        real = [o for o in desc.oneofs if o.index not in synthetic]
        by_column: dict[str, _Out] = {}
        for k, fd in enumerate(desc.fields):
            row = planner.fields[first + k]
            column = field_names[fd.name]
            by_column[column] = self._describe_field(planner, fd, row, arrow.field(column).type)
        for k, o in enumerate(real):
            by_column[case_names[o.name]] = _Out(
                planner.cases[case_first + k],
                pa.string(),
                "case",
                pa.array([f.name for f in o.fields], pa.string()),
            )
        return [by_column[arrow.field(i).name] for i in range(arrow.num_fields)]

    def _describe_field(
        self, planner: _PlanBuilder, fd: FieldDescriptor, row: list[int], arrow: pa.DataType
    ) -> _Out:
        kind, label, b, elem, sub, kind2, elem2 = (row[1], row[2], *row[4:9])
        if label == L_MAP:
            entry = fd.message_type
            key = self._describe_value(
                planner, entry.fields_by_name["key"], kind, elem, -1, arrow.key_type
            )
            value = self._describe_value(
                planner, entry.fields_by_name["value"], kind2, elem2, sub, arrow.item_type
            )
            return _Out(b, arrow, elem=key, elem2=value)
        if label == L_REPEATED:
            element = self._describe_value(planner, fd, kind, elem, sub, arrow.value_type)
            return _Out(b, arrow, elem=element)
        return self._describe_value(planner, fd, kind, b, sub, arrow)

    def _describe_value(
        self,
        planner: _PlanBuilder,
        fd: FieldDescriptor,
        kind: int,
        b: int,
        sub: int,
        arrow: pa.DataType,
    ) -> _Out:
        if sub >= 0:
            children = self._describe_message(planner, sub, fd.message_type, arrow)
            return _Out(b, arrow, children=children)
        if kind == K_ENUM:
            names = _EnumNames()
            for value in fd.enum_type.values:
                names.setdefault(value.number, value.name)
            return _Out(b, arrow, "enum", names)
        if kind in _UINT64_KINDS:
            return _Out(b, arrow, "uint64")
        if kind in _BOOL_KINDS:
            return _Out(b, arrow, "bool")
        return _Out(b, arrow)

    # ------------------------------------------------------------------ decoding

    def decode(self, values: pa.Array, starts: pa.Array) -> tuple[pa.RecordBatch, list[int]]:
        """Decode payload ``values[i][starts[i]:]`` for each row.

        Returns:
            (batch of the rows decoded here, in row order, without the given-back rows;
            indexes of the rows given back, ascending: decode them with the upb path).

        Raises:
            MemoryError: the C decoder could not allocate its buffers.
        """
        n = len(values)
        if pa.types.is_large_binary(values.type):
            values = values.cast(pa.binary())
        offsets_buf, data_buf = values.buffers()[1], values.buffers()[2]
        value_offsets = np.frombuffer(offsets_buf, dtype=np.int32)[
            values.offset : values.offset + n + 1
        ]
        value_offsets = np.ascontiguousarray(value_offsets)
        start_arr = np.ascontiguousarray(
            starts.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int32
        )
        given_back = np.zeros(max(n, 1), dtype=np.int64)
        n_given = ctypes.c_int64(0)
        data_ptr = data_buf.address if data_buf is not None and data_buf.size else 0
        lib = self._lib
        result = lib.w2a_decode(
            self._plan,
            data_ptr,
            value_offsets.ctypes.data,
            start_arr.ctypes.data,
            n,
            given_back.ctypes.data,
            ctypes.byref(n_given),
        )
        if not result:
            raise MemoryError("the native protobuf decoder ran out of memory")
        try:
            rows = n - n_given.value
            arrays = [self._array(result, out, rows) for out in self._outs]
        finally:
            lib.w2a_result_free(result)
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
        return batch, given_back[: n_given.value].tolist()

    def _buffer(self, result: int, b: int, which: int) -> bytes:
        size = ctypes.c_int64(0)
        ptr = self._lib.w2a_buffer(result, b, which, ctypes.byref(size))
        return ctypes.string_at(ptr, size.value) if size.value else b""

    def _array(self, result: int, out: _Out, n: int) -> pa.Array:
        btype = self._btypes[out.builder]
        valid = _validity(self._buffer(result, out.builder, 0), n)
        if btype == B_STRUCT:
            children = [self._array(result, child, n) for child in out.children]
            return pa.Array.from_buffers(out.arrow, n, [valid], children=children)
        if btype == B_LIST:
            offsets = pa.py_buffer(self._buffer(result, out.builder, 2))
            count = int(np.frombuffer(offsets, dtype=np.int32)[-1]) if n else 0
            assert out.elem is not None
            keys = self._array(result, out.elem, count)
            if out.elem2 is None:
                return pa.Array.from_buffers(out.arrow, n, [None, offsets], children=[keys])
            items = self._array(result, out.elem2, count)
            offsets_arr = pa.Array.from_buffers(pa.int32(), n + 1, [None, offsets])
            return pa.MapArray.from_arrays(offsets_arr, keys, items, type=out.arrow)
        data = self._buffer(result, out.builder, 1)
        if btype == B_BIN:
            offsets = pa.py_buffer(self._buffer(result, out.builder, 2))
            return pa.Array.from_buffers(out.arrow, n, [valid, offsets, pa.py_buffer(data)])
        if out.convert == "bool":
            bits = np.packbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
            return pa.Array.from_buffers(pa.bool_(), n, [valid, pa.py_buffer(bits.tobytes())])
        if out.convert == "uint64":
            raw = pa.Array.from_buffers(pa.uint64(), n, [valid, pa.py_buffer(data)])
            return raw.cast(ARROW_UINT64_DECIMAL)
        if out.convert in ("enum", "case"):
            numbers = pa.Array.from_buffers(pa.int32(), n, [valid, pa.py_buffer(data)])
            return _names(numbers, out)
        return pa.Array.from_buffers(out.arrow, n, [valid, pa.py_buffer(data)])


def _names(numbers: pa.Array, out: _Out) -> pa.Array:
    """Enum numbers -> names (an unknown number as its decimal text); oneof positions -> names."""
    if out.convert == "case":
        return out.names.take(numbers)
    distinct = numbers.unique().drop_null()
    lookup = out.names
    names = pa.array([lookup[v] for v in distinct.to_pylist()], pa.string())
    return names.take(pc.index_in(numbers, value_set=distinct))


def native_decoder(
    descriptor: Descriptor, arrow_schema: pa.Schema, max_depth: int
) -> NativeDecoder | None:
    """The C decoder for one message type, or None when it has no plan or no library.

    Building one plans the type and hands the plan to C: do it once per type and keep it.
    """
    lib = library()
    if lib is None:
        return None
    try:
        return NativeDecoder(lib, descriptor, arrow_schema, max_depth)
    except UnsupportedTypeError as exc:
        log.info("native decoder not used for %s: %s", descriptor.full_name, exc)
        return None
