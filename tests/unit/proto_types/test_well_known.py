"""Well-known types: Timestamp, Duration, wrappers, Struct/Value/ListValue/Any/Empty."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
from google.protobuf import any_pb2, struct_pb2
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    TimestampType,
)

from pipelines.proto_types import RowConverter, spark_schema_for, to_json_text

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_well_known_types_map_to_their_columns(protos):
    descriptor = protos.descriptor("protolake.test.v3.WellKnown")
    schema = spark_schema_for(descriptor)
    assert {f.name: f.dataType for f in schema.fields} == {
        "ts": TimestampType(),
        "dur": DoubleType(),
        "w_double": DoubleType(),
        "w_float": FloatType(),
        "w_int64": LongType(),
        "w_uint64": DecimalType(20, 0),
        "w_int32": IntegerType(),
        "w_uint32": LongType(),
        "w_bool": BooleanType(),
        "w_string": StringType(),
        "w_bytes": BinaryType(),
        "st": StringType(),
        "val": StringType(),
        "lst": StringType(),
        "any": StringType(),
        "empty": StringType(),
        "ts_list": ArrayType(TimestampType()),
        "durations": MapType(StringType(), DoubleType()),
        "w_int32_list": ArrayType(IntegerType()),
    }
    arrow = RowConverter(descriptor).arrow_schema
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")


def test_unset_well_known_fields_are_null(protos):
    cls = protos.v3("WellKnown")
    row = RowConverter(cls.DESCRIPTOR).to_dict(cls())
    assert {k: v for k, v in row.items() if v is not None} == {
        "ts_list": [],
        "durations": [],
        "w_int32_list": [],
    }


def test_timestamps_are_utc_microseconds(protos):
    cls = protos.v3("WellKnown")
    conv = RowConverter(cls.DESCRIPTOR)
    msg = cls()
    msg.ts.seconds = 1_700_000_000
    msg.ts.nanos = 123_456_789  # sub-microsecond digits are truncated
    before = msg.ts_list.add()
    before.seconds = -1  # 1969-12-31T23:59:59.5Z
    before.nanos = 500_000_000
    msg.ts_list.add()  # the epoch, set explicitly: not null
    far = msg.ts_list.add()
    far.FromDatetime(datetime(9999, 12, 31, 23, 59, 59, 999999))
    row = conv.to_dict(cls.FromString(msg.SerializeToString()))
    assert row["ts"] == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert row["ts_list"] == [
        EPOCH - timedelta(microseconds=500_000),
        EPOCH,
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    # set to the epoch is a value, not a null
    msg2 = cls()
    msg2.ts.SetInParent()
    assert conv.to_dict(msg2)["ts"] == EPOCH


def test_durations_are_double_seconds(protos):
    cls = protos.v3("WellKnown")
    msg = cls()
    msg.dur.seconds = -3
    msg.dur.nanos = -250_000_000
    msg.durations["tiny"].nanos = 1
    msg.durations["day"].seconds = 86_400
    row = RowConverter(cls.DESCRIPTOR).to_dict(cls.FromString(msg.SerializeToString()))
    assert row["dur"] == -3.25
    assert dict(row["durations"]) == {"tiny": 1e-9, "day": 86400.0}


def test_wrappers_are_nullable_scalars(protos):
    cls = protos.v3("WellKnown")
    conv = RowConverter(cls.DESCRIPTOR)
    msg = cls()
    msg.w_double.value = 2.5
    msg.w_float.value = -0.5
    msg.w_int64.value = -(2**63)
    msg.w_uint64.value = 2**64 - 1
    msg.w_int32.value = 0  # set to zero: a value, not a null
    msg.w_uint32.value = 2**32 - 1
    msg.w_bool.value = False
    msg.w_string.value = "s"
    msg.w_bytes.value = b"\xfe"
    msg.w_int32_list.add(value=4)
    msg.w_int32_list.add()
    row = conv.to_dict(cls.FromString(msg.SerializeToString()))
    assert {k: row[k] for k in row if k.startswith("w_")} == {
        "w_double": 2.5,
        "w_float": -0.5,
        "w_int64": -(2**63),
        "w_uint64": Decimal(2**64 - 1),
        "w_int32": 0,
        "w_uint32": 2**32 - 1,
        "w_bool": False,
        "w_string": "s",
        "w_bytes": b"\xfe",
        "w_int32_list": [4, 0],
    }
    only_one = cls()
    only_one.w_string.value = ""
    row = conv.to_dict(only_one)
    assert row["w_string"] == "" and row["w_int32"] is None and row["w_uint64"] is None


def test_struct_value_list_value_are_json_text(protos):
    cls = protos.v3("WellKnown")
    msg = cls()
    msg.st.update({"a": 1, "b": [True, None, "x"], "c": {"d": "ü"}})
    msg.val.string_value = "just text"
    msg.lst.extend([1, "two"])
    row = RowConverter(cls.DESCRIPTOR).to_dict(cls.FromString(msg.SerializeToString()))
    assert json.loads(row["st"]) == {"a": 1.0, "b": [True, None, "x"], "c": {"d": "ü"}}
    assert "ü" in row["st"]  # non-ASCII kept as is
    assert row["val"] == '"just text"'
    assert row["lst"] == '[1.0,"two"]'
    null_value = cls()
    null_value.val.null_value = 0
    row = RowConverter(cls.DESCRIPTOR).to_dict(null_value)
    assert row["val"] == "null"  # JSON null, set: different from an unset (SQL NULL) field
    assert row["st"] is None


def test_any_is_json_with_its_type_when_resolvable(protos):
    cls = protos.v3("WellKnown")
    point = protos.v3("Point")(x=7, origin={"source": "gps"})
    msg = cls()
    msg.any.Pack(point)
    text = RowConverter(cls.DESCRIPTOR).to_dict(cls.FromString(msg.SerializeToString()))["any"]
    assert json.loads(text) == {
        "@type": "type.googleapis.com/protolake.test.v3.Point",
        "x": 7,
        "origin": {"source": "gps"},
    }


def test_any_of_an_unknown_type_keeps_type_url_and_base64_bytes(protos):
    cls = protos.v3("WellKnown")
    msg = cls()
    msg.any.type_url = "type.googleapis.com/elsewhere.Unknown"
    msg.any.value = b"\x08\x96\x01"
    text = RowConverter(cls.DESCRIPTOR).to_dict(msg)["any"]
    assert json.loads(text) == {
        "@type": "type.googleapis.com/elsewhere.Unknown",
        "value": base64.b64encode(b"\x08\x96\x01").decode(),
    }


def test_json_fallback_for_a_value_json_cannot_hold():
    value = struct_pb2.Value(number_value=float("inf"))
    assert json.loads(to_json_text(value)) == {
        "@type": "type.googleapis.com/google.protobuf.Value",
        "value": base64.b64encode(value.SerializeToString()).decode(),
    }
    unknown = any_pb2.Any(type_url="x/y.Z", value=b"\x01")
    assert to_json_text(unknown) == '{"@type":"x/y.Z","value":"AQ=="}'


def test_an_any_whose_bytes_do_not_parse_keeps_them(protos):
    cls = protos.v3("WellKnown")
    msg = cls()
    msg.any.type_url = "type.googleapis.com/protolake.test.v3.Point"
    msg.any.value = b"\x0a\x05ab"  # truncated
    text = RowConverter(cls.DESCRIPTOR).to_dict(msg)["any"]
    assert json.loads(text) == {
        "@type": "type.googleapis.com/protolake.test.v3.Point",
        "value": base64.b64encode(b"\x0a\x05ab").decode(),
    }


def test_empty_message_is_json_text(protos):
    cls = protos.v3("WellKnown")
    msg = cls()
    msg.empty.SetInParent()
    assert RowConverter(cls.DESCRIPTOR).to_dict(msg)["empty"] == "{}"


def test_mixed_presence_in_one_batch(protos):
    cls = protos.v3("WellKnown")
    set_all = cls()
    set_all.ts.seconds = 60
    set_all.dur.seconds = 2
    set_all.w_uint64.value = 5
    set_all.st.update({"a": "b"})
    set_all.empty.SetInParent()
    batch = RowConverter(cls.DESCRIPTOR).to_record_batch([cls(), set_all, cls()])
    got = {
        name: batch.column(name).to_pylist() for name in ("ts", "dur", "w_uint64", "st", "empty")
    }
    assert got == {
        "ts": [None, EPOCH + timedelta(seconds=60), None],
        "dur": [None, 2.0, None],
        "w_uint64": [None, Decimal(5), None],
        "st": [None, '{"a":"b"}', None],
        "empty": [None, "{}", None],
    }
