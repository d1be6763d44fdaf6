"""Scalar fields, field by field: Spark type, Arrow type, and the value a message gives."""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
)

from pipelines.proto_types import RowConverter, arrow_schema_for, spark_schema_for

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1

# field -> (Spark type, Arrow type) per the mapping table in docs/type-mapping.md
EXPECTED_TYPES = {
    "f_int32": (IntegerType(), pa.int32()),
    "f_int64": (LongType(), pa.int64()),
    "f_uint32": (LongType(), pa.int64()),
    "f_uint64": (DecimalType(20, 0), pa.decimal128(20, 0)),
    "f_sint32": (IntegerType(), pa.int32()),
    "f_sint64": (LongType(), pa.int64()),
    "f_fixed32": (LongType(), pa.int64()),
    "f_fixed64": (DecimalType(20, 0), pa.decimal128(20, 0)),
    "f_sfixed32": (IntegerType(), pa.int32()),
    "f_sfixed64": (LongType(), pa.int64()),
    "f_float": (FloatType(), pa.float32()),
    "f_double": (DoubleType(), pa.float64()),
    "f_bool": (BooleanType(), pa.bool_()),
    "f_string": (StringType(), pa.string()),
    "f_bytes": (BinaryType(), pa.binary()),
    "f_enum": (StringType(), pa.string()),
}


@pytest.mark.parametrize("message", ["Scalars", "OptionalScalars"])
def test_every_scalar_type_maps_to_its_column_type(protos, message):
    descriptor = protos.descriptor(f"protolake.test.v3.{message}")
    schema = spark_schema_for(descriptor)
    arrow = arrow_schema_for(descriptor)
    assert schema.fieldNames() == list(EXPECTED_TYPES)
    assert arrow.names == list(EXPECTED_TYPES)
    for name, (spark_type, arrow_type) in EXPECTED_TYPES.items():
        assert schema[name].dataType == spark_type, name
        assert schema[name].nullable is True, name
        assert arrow.field(name).type == arrow_type, name


def test_extreme_values_survive_exactly(protos):
    msg = protos.v3("Scalars")(
        f_int32=INT32[0],
        f_int64=INT64[0],
        f_uint32=UINT32_MAX,
        f_uint64=UINT64_MAX,
        f_sint32=INT32[1],
        f_sint64=INT64[1],
        f_fixed32=UINT32_MAX,
        f_fixed64=UINT64_MAX,
        f_sfixed32=INT32[0],
        f_sfixed64=INT64[0],
        f_float=-2.25,
        f_double=1e308,
        f_bool=True,
        f_string="naïve ☃ 東京",
        f_bytes=b"\x00\xff\x80",
        f_enum=2,
    )
    row = RowConverter(msg.DESCRIPTOR).to_dict(msg)
    assert row == {
        "f_int32": INT32[0],
        "f_int64": INT64[0],
        "f_uint32": UINT32_MAX,
        "f_uint64": Decimal(UINT64_MAX),
        "f_sint32": INT32[1],
        "f_sint64": INT64[1],
        "f_fixed32": UINT32_MAX,
        "f_fixed64": Decimal(UINT64_MAX),
        "f_sfixed32": INT32[0],
        "f_sfixed64": INT64[0],
        "f_float": -2.25,
        "f_double": 1e308,
        "f_bool": True,
        "f_string": "naïve ☃ 東京",
        "f_bytes": b"\x00\xff\x80",
        "f_enum": "GREEN",
    }
    # never a wrapped negative
    assert row["f_uint64"] > 0 and row["f_fixed64"] > 0


def test_implicit_presence_scalars_give_protobuf_defaults(protos):
    msg = protos.v3("Scalars")()
    row = RowConverter(msg.DESCRIPTOR).to_row(msg)
    assert row == (
        0,
        0,
        0,
        Decimal(0),
        0,
        0,
        0,
        Decimal(0),
        0,
        0,
        0.0,
        0.0,
        False,
        "",
        b"",
        "COLOR_UNSPECIFIED",
    )


def test_optional_scalars_are_null_when_absent_and_zero_when_set_to_zero(protos):
    cls = protos.v3("OptionalScalars")
    conv = RowConverter(cls.DESCRIPTOR)
    assert conv.to_row(cls()) == (None,) * 16
    zeros = cls(
        f_int32=0,
        f_int64=0,
        f_uint32=0,
        f_uint64=0,
        f_sint32=0,
        f_sint64=0,
        f_fixed32=0,
        f_fixed64=0,
        f_sfixed32=0,
        f_sfixed64=0,
        f_float=0.0,
        f_double=0.0,
        f_bool=False,
        f_string="",
        f_bytes=b"",
        f_enum=0,
    )
    assert conv.to_row(zeros) == (
        0,
        0,
        0,
        Decimal(0),
        0,
        0,
        0,
        Decimal(0),
        0,
        0,
        0.0,
        0.0,
        False,
        "",
        b"",
        "COLOR_UNSPECIFIED",
    )


def test_special_floats(protos):
    cls = protos.v3("Scalars")
    conv = RowConverter(cls.DESCRIPTOR)
    row = conv.to_dict(cls(f_float=float("inf"), f_double=float("nan")))
    assert row["f_float"] == math.inf
    assert math.isnan(row["f_double"])


def test_unknown_number_of_an_open_enum_keeps_its_number(protos):
    cls = protos.v3("Scalars")
    # field 16 (f_enum), varint 17: a number Color does not define, as a newer writer sends it
    msg = cls.FromString(bytes([0x80, 0x01, 17]))
    assert msg.f_enum == 17
    assert RowConverter(cls.DESCRIPTOR).to_dict(msg)["f_enum"] == "17"
    # and a negative one (enums are int32 on the wire)
    neg = cls(f_enum=-5)
    assert RowConverter(cls.DESCRIPTOR).to_dict(neg)["f_enum"] == "-5"


@settings(max_examples=60, deadline=None)
@given(
    i32=st.integers(*INT32),
    i64=st.integers(*INT64),
    u32=st.integers(0, UINT32_MAX),
    u64=st.integers(0, UINT64_MAX),
    dbl=st.floats(allow_nan=False),
    text=st.text(),
    blob=st.binary(),
)
def test_any_scalar_value_round_trips_through_a_batch(protos, i32, i64, u32, u64, dbl, text, blob):
    cls = protos.v3("OptionalScalars")
    msg = cls(
        f_sint32=i32,
        f_sfixed64=i64,
        f_fixed32=u32,
        f_uint64=u64,
        f_double=dbl,
        f_string=text,
        f_bytes=blob,
    )
    decoded = cls.FromString(msg.SerializeToString())
    batch = RowConverter(cls.DESCRIPTOR).to_record_batch([decoded, cls()])
    got = batch.to_pylist()
    assert got[0]["f_sint32"] == i32
    assert got[0]["f_sfixed64"] == i64
    assert got[0]["f_fixed32"] == u32
    assert got[0]["f_uint64"] == Decimal(u64)
    assert got[0]["f_double"] == dbl
    assert got[0]["f_string"] == text
    assert got[0]["f_bytes"] == blob
    assert got[0]["f_int32"] is None
    assert set(got[1].values()) == {None}
