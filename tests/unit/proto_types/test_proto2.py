"""proto2: every field has presence (null when absent, never the declared default), closed
enums, groups, and two fields whose names differ only in case."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from pipelines.proto_types import RowConverter, column_names, spark_schema_for


def test_absent_optional_fields_are_null_not_their_declared_default(protos):
    cls = protos.v2("Legacy")
    msg = cls(id=1)
    assert msg.f_int32 == 7 and msg.f_string == "dflt"  # protobuf reads the [default]s...
    row = RowConverter(cls.DESCRIPTOR).to_dict(msg)
    # ...but the row says the writer did not send them
    assert row == {
        "id": 1,
        "f_int32": None,
        "f_int64": None,
        "f_uint32": None,
        "f_uint64": None,
        "f_sint32": None,
        "f_sint64": None,
        "f_fixed32": None,
        "f_fixed64": None,
        "f_sfixed32": None,
        "f_sfixed64": None,
        "f_float": None,
        "f_double": None,
        "f_bool": None,
        "f_string": None,
        "f_bytes": None,
        "level": None,
        "numbers": [],
        "inner": None,
        "extra": None,
        "Name": None,
        "name_23": None,
    }


def test_present_fields_keep_their_values_even_when_equal_to_the_default(protos):
    cls = protos.v2("Legacy")
    msg = cls(
        id=-9,
        f_int32=7,
        f_uint64=2**64 - 1,
        f_fixed64=2**63,
        f_bool=False,
        f_string="",
        f_bytes=b"",
        level=1,
        numbers=[3, 1, 2],
    )
    msg.inner.label = "x"
    msg.extra.score = 5
    row = RowConverter(cls.DESCRIPTOR).to_dict(cls.FromString(msg.SerializeToString()))
    assert row["id"] == -9
    assert row["f_int32"] == 7
    assert row["f_uint64"] == Decimal(2**64 - 1)
    assert row["f_fixed64"] == Decimal(2**63)
    assert row["f_bool"] is False
    assert row["f_string"] == ""
    assert row["f_bytes"] == b""
    assert row["level"] == "LOW"
    assert row["numbers"] == [3, 1, 2]
    assert row["inner"] == {"label": "x"}
    assert row["extra"] == {"score": 5}
    assert row["f_int64"] is None


def test_group_is_a_struct(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v2.Legacy"))
    assert schema["extra"].dataType == StructType([StructField("score", IntegerType())])


def test_names_differing_only_in_case_do_not_collide(protos):
    descriptor = protos.descriptor("protolake.test.v2.Legacy")
    fields, cases = column_names(descriptor)
    # the lower field number keeps the name; the other one gets its number appended
    assert fields["Name"] == "Name"
    assert fields["name"] == "name_23"
    assert cases == {}
    schema = spark_schema_for(descriptor)
    assert schema["name_23"].dataType == StringType()
    lowered = [n.lower() for n in schema.fieldNames()]
    assert len(lowered) == len(set(lowered))
    cls = protos.v2("Legacy")
    row = RowConverter(descriptor).to_dict(cls(id=1, Name="upper", name="lower"))
    assert (row["Name"], row["name_23"]) == ("upper", "lower")
