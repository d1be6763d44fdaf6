"""RowConverter.to_record_batch: the executors' path; rows, schema, errors."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.proto_types import (
    RowConversionError,
    RowConverter,
    arrow_schema_for,
    converter_for,
    spark_schema_for,
)

ALL_V3 = [
    "Scalars",
    "OptionalScalars",
    "Repeated",
    "Point",
    "Maps",
    "Choice",
    "WellKnown",
    "TreeNode",
    "Expr",
    "BinaryOp",
    "Shipment",
]


@pytest.mark.parametrize("name", ALL_V3)
def test_arrow_schema_is_what_spark_reads_as_the_spark_schema(protos, name):
    descriptor = protos.descriptor(f"protolake.test.v3.{name}")
    arrow = arrow_schema_for(descriptor)
    spark = spark_schema_for(descriptor)
    assert from_arrow_schema(arrow) == spark


@pytest.mark.parametrize("name", ALL_V3)
def test_empty_input_gives_an_empty_batch_with_the_schema(protos, name):
    conv = RowConverter(protos.descriptor(f"protolake.test.v3.{name}"))
    batch = conv.to_record_batch([])
    assert batch.num_rows == 0
    assert batch.schema == conv.arrow_schema


def test_batch_rows_equal_single_rows_for_mixed_messages(protos):
    cls = protos.v3("Choice")
    point = protos.v3("Point")
    msgs = [
        cls(id="1", number=5),
        cls(),
        cls(id="3", point=point(x=1, origin={"source": "a"}), color=2, note="n"),
        cls(id="4", point=point(y=2)),
        cls(id="5", text="t", flag=True),
    ]
    conv = RowConverter(cls.DESCRIPTOR)
    batch = conv.to_record_batch(iter(msgs))  # any iterable
    assert batch.schema == conv.arrow_schema
    assert [tuple(r.values()) for r in batch.to_pylist()] == [conv.to_row(m) for m in msgs]
    # rows as produced are accepted by pyarrow for the same schema
    again = pa.RecordBatch.from_pylist(batch.to_pylist(), schema=conv.arrow_schema)
    assert again.equals(batch)


def test_a_column_absent_in_every_message_is_all_null(protos):
    cls = protos.v3("OptionalScalars")
    batch = RowConverter(cls.DESCRIPTOR).to_record_batch([cls(), cls()])
    assert batch.column("f_uint64").null_count == 2
    assert batch.column("f_uint64").type == pa.decimal128(20, 0)


def test_a_proto2_string_that_is_not_utf8_names_the_record(protos):
    cls = protos.v2("Legacy")
    good = cls(id=1, f_string="ok")
    # field 15 (f_string), length 2, bytes ff fe: proto2 does not validate UTF-8 on parse
    bad = cls.FromString(bytes([0x08, 0x02, 0x7A, 0x02, 0xFF, 0xFE]))
    conv = RowConverter(cls.DESCRIPTOR)
    with pytest.raises(RowConversionError) as info:
        conv.to_record_batch([good, good, bad, good])
    assert info.value.index == 2
    assert info.value.column == "f_string"
    assert info.value.message_type == "protolake.test.v2.Legacy"
    assert "record 2 of protolake.test.v2.Legacy, column `f_string`" in str(info.value)
    # the others still convert
    assert conv.to_record_batch([good, good, good]).num_rows == 3


def test_messages_of_another_type_are_refused(protos):
    conv = RowConverter(protos.descriptor("protolake.test.v3.Choice"))
    with pytest.raises(TypeError, match="protolake.test.v3.Point"):
        conv.to_record_batch([protos.v3("Point")()])


def test_converter_for_caches_per_descriptor_and_depth(protos):
    descriptor = protos.descriptor("protolake.test.v3.TreeNode")
    assert converter_for(descriptor, 2) is converter_for(descriptor, 2)
    assert converter_for(descriptor, 2) is not converter_for(descriptor, 3)
    assert converter_for(descriptor, 2).spark_schema == spark_schema_for(descriptor, 2)


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(2**62, 0), (253_402_300_800, 0), (-62_135_596_801, 0), (0, -1), (0, 10**9)],
)
def test_a_timestamp_out_of_range_names_the_record(protos, seconds, nanos):
    # 2**62 s would overflow int64 microseconds; the others are outside Timestamp's range
    cls = protos.v3("WellKnown")
    fine = cls()
    fine.ts.seconds = 1
    broken = cls()
    broken.ts.seconds, broken.ts.nanos = seconds, nanos
    with pytest.raises(RowConversionError) as info:
        RowConverter(cls.DESCRIPTOR).to_record_batch([fine, broken])
    assert (info.value.index, info.value.column) == (1, "ts")
    assert "Timestamp out of range" in str(info.value)
