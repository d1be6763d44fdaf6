"""repeated -> array, map -> map (keys per the scalar mapping, message values as structs)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.proto_types import RowConverter, spark_schema_for

POINT = StructType(
    [
        StructField("x", IntegerType()),
        StructField("y", IntegerType()),
        StructField("origin", StructType([StructField("source", StringType())])),
    ]
)


def test_repeated_fields_are_arrays_of_the_element_mapping(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v3.Repeated"))
    assert schema["r_int32"].dataType == ArrayType(IntegerType())
    assert schema["r_uint32"].dataType == ArrayType(LongType())
    assert schema["r_fixed64"].dataType == ArrayType(DecimalType(20, 0))
    assert schema["r_bytes"].dataType == ArrayType(BinaryType())
    assert schema["r_enum"].dataType == ArrayType(StringType())
    assert schema["r_msg"].dataType == ArrayType(POINT)


def test_repeated_values(protos):
    cls = protos.v3("Repeated")
    point = protos.v3("Point")
    msg = cls(
        r_int32=[1, -2, 2**31 - 1],
        r_int64=[-(2**63)],
        r_uint32=[2**32 - 1, 0],
        r_uint64=[2**64 - 1, 1],
        r_sint32=[-1],
        r_sint64=[-2],
        r_fixed32=[3],
        r_fixed64=[2**64 - 2],
        r_sfixed32=[-4],
        r_sfixed64=[-5],
        r_float=[0.5, -1.0],
        r_double=[2.5],
        r_bool=[True, False, True],
        r_string=["a", "", "ü"],
        r_bytes=[b"", b"\x01"],
        r_enum=[1, 0, 99],
        r_msg=[point(x=1, y=2, origin={"source": "gps"}), point()],
    )
    row = RowConverter(cls.DESCRIPTOR).to_dict(cls.FromString(msg.SerializeToString()))
    assert row == {
        "r_int32": [1, -2, 2**31 - 1],
        "r_int64": [-(2**63)],
        "r_uint32": [2**32 - 1, 0],
        "r_uint64": [Decimal(2**64 - 1), Decimal(1)],
        "r_sint32": [-1],
        "r_sint64": [-2],
        "r_fixed32": [3],
        "r_fixed64": [Decimal(2**64 - 2)],
        "r_sfixed32": [-4],
        "r_sfixed64": [-5],
        "r_float": [0.5, -1.0],
        "r_double": [2.5],
        "r_bool": [True, False, True],
        "r_string": ["a", "", "ü"],
        "r_bytes": [b"", b"\x01"],
        "r_enum": ["RED", "COLOR_UNSPECIFIED", "99"],
        "r_msg": [
            {"x": 1, "y": 2, "origin": {"source": "gps"}},
            # an element is always present; its unset sub-message is null
            {"x": 0, "y": 0, "origin": None},
        ],
    }


def test_map_types(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v3.Maps"))
    assert schema["str_to_long"].dataType == MapType(StringType(), LongType())
    assert schema["int_to_str"].dataType == MapType(IntegerType(), StringType())
    assert schema["u64_to_bool"].dataType == MapType(DecimalType(20, 0), BooleanType())
    assert schema["bool_to_bytes"].dataType == MapType(BooleanType(), BinaryType())
    assert schema["str_to_msg"].dataType == MapType(StringType(), POINT)
    assert schema["long_to_enum"].dataType == MapType(LongType(), StringType())
    assert schema["str_to_ts"].dataType == MapType(StringType(), TimestampType())
    assert schema["u32_to_u64"].dataType == MapType(LongType(), DecimalType(20, 0))


def test_map_values(protos):
    cls = protos.v3("Maps")
    msg = cls()
    msg.str_to_long["a"] = -1
    msg.str_to_long["b"] = 2**63 - 1
    msg.int_to_str[-7] = "minus seven"
    msg.u64_to_bool[2**64 - 1] = True
    msg.bool_to_bytes[False] = b"\x00"
    msg.str_to_msg["p"].x = 3
    msg.str_to_msg["q"].origin.source = "s"
    msg.long_to_enum[5] = 2
    msg.long_to_enum[6] = 42
    msg.str_to_ts["t"].seconds = 1_700_000_000
    msg.u32_to_u64[2**32 - 1] = 2**64 - 1
    conv = RowConverter(cls.DESCRIPTOR)
    row = conv.to_dict(cls.FromString(msg.SerializeToString()))
    # map order is protobuf's, which is unspecified: compare as dicts
    as_dicts = {name: dict(pairs) for name, pairs in row.items()}
    assert as_dicts == {
        "str_to_long": {"a": -1, "b": 2**63 - 1},
        "int_to_str": {-7: "minus seven"},
        "u64_to_bool": {Decimal(2**64 - 1): True},
        "bool_to_bytes": {False: b"\x00"},
        "str_to_msg": {
            "p": {"x": 3, "y": 0, "origin": None},
            "q": {"x": 0, "y": 0, "origin": {"source": "s"}},
        },
        "long_to_enum": {5: "GREEN", 6: "42"},
        "str_to_ts": {"t": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)},
        "u32_to_u64": {2**32 - 1: Decimal(2**64 - 1)},
    }
    assert all(len(pairs) == len(as_dicts[name]) for name, pairs in row.items())


def test_batch_offsets_line_up_across_messages(protos):
    cls = protos.v3("Maps")
    rep = protos.v3("Repeated")
    msgs = [cls(str_to_long={"a": 1}), cls(), cls(str_to_long={"b": 2, "c": 3})]
    batch = RowConverter(cls.DESCRIPTOR).to_record_batch(msgs)
    assert [dict(m) for m in batch.column("str_to_long").to_pylist()] == [
        {"a": 1},
        {},
        {"b": 2, "c": 3},
    ]
    reps = [rep(r_string=["x"]), rep(), rep(r_string=["y", "z"])]
    column = RowConverter(rep.DESCRIPTOR).to_record_batch(reps).column("r_string")
    assert column.to_pylist() == [["x"], [], ["y", "z"]]
    assert column.null_count == 0
    assert column.type == pa.list_(pa.string())
