"""RowConverter batches through real Spark: mapInArrow over serialized payloads on local[2],
then a Delta table, compared with hand-written expected rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipelines.proto_types import RowConverter

pytestmark = pytest.mark.integration

SHIPMENT = "protolake.test.v3.Shipment"
UINT64_MAX = 2**64 - 1


def _payloads(protos) -> list[bytes]:
    cls = protos.v3("Shipment")
    point = protos.v3("Point")
    full = cls(id="full", weight_mg=UINT64_MAX, color=2, priority=0, text="fragile")
    full.shipped_at.seconds = 1_700_000_000
    full.shipped_at.nanos = 123_456_789
    full.transit.seconds = 93_784  # 1 day 2 h 3 min 4.5 s
    full.transit.nanos = 500_000_000
    full.stops["lyon"].CopyFrom(point(x=1, y=2, origin={"source": "gps"}))
    full.stops["porto"].CopyFrom(point(x=-3))
    full.route.extend([point(x=5, y=6), point(y=7, origin={"source": "map"})])
    full.extra.update({"k": "v"})
    full.counter.value = UINT64_MAX
    empty = cls(id="empty")
    open_enum = cls(id="open", code=-(2**63))
    open_enum.color = 42  # a number Color does not define (proto3 enums are open)
    return [m.SerializeToString() for m in (full, empty, open_enum)]


def _convert_on_executors(fds: bytes, message_type: str):
    """The mapInArrow function: decode the payloads and convert, building the message class
    and the converter on the executor from the descriptor set bytes (they do not pickle)."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        pool = descriptor_pool.DescriptorPool()
        for file in descriptor_pb2.FileDescriptorSet.FromString(fds).file:
            pool.Add(file)
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message_type))
        conv = RowConverter(cls.DESCRIPTOR, file_descriptor_set=fds)
        for batch in batches:
            messages = [cls.FromString(p) for p in batch.column("payload").to_pylist()]
            yield conv.to_record_batch(messages)

    return convert


def _expected_rows() -> list[Row]:
    def point(x: int, y: int, source: str | None) -> Row:
        return Row(x=x, y=y, origin=None if source is None else Row(source=source))

    empty_defaults = dict(
        weight_mg=Decimal(0),
        shipped_at=None,
        transit=None,
        stops={},
        route=[],
        color="COLOR_UNSPECIFIED",
        priority=None,
        extra=None,
        counter=None,
    )
    return [
        Row(
            id="full",
            weight_mg=Decimal(UINT64_MAX),
            # session time zone is UTC; Spark hands back naive datetimes in it
            shipped_at=dt.datetime(2023, 11, 14, 22, 13, 20, 123456),
            transit=93_784.5,
            stops={"lyon": point(1, 2, "gps"), "porto": point(-3, 0, None)},
            route=[point(5, 6, None), point(0, 7, "map")],
            color="GREEN",
            priority=0,
            text="fragile",
            code=None,
            label_case="text",
            extra='{"k":"v"}',
            counter=Decimal(UINT64_MAX),
        ),
        Row(id="empty", **empty_defaults, text=None, code=None, label_case=None),
        Row(
            id="open",
            **{**empty_defaults, "color": "42"},
            text=None,
            code=-(2**63),
            label_case="code",
        ),
    ]


def test_map_in_arrow_then_delta_gives_the_expected_rows(spark, protos, tmp_path):
    descriptor = protos.descriptor(SHIPMENT)
    conv = RowConverter(descriptor, file_descriptor_set=protos.fds)
    payloads = spark.createDataFrame([(p,) for p in _payloads(protos)], "payload binary")
    df = payloads.repartition(2).mapInArrow(
        _convert_on_executors(protos.fds, SHIPMENT), conv.spark_schema
    )
    expected_schema = conv.spark_schema
    column_order = expected_schema.fieldNames()
    expected = spark.createDataFrame(
        [Row(**{name: row[name] for name in column_order}) for row in _expected_rows()],
        expected_schema,
    )
    assertDataFrameEqual(df, expected)
    assert df.schema["weight_mg"].metadata == {
        "comment": "Weight in milligrams; uint64 so that 2^64-1 is a legal value."
    }

    # every mapped type is storable in Delta (an interval column would not be)
    path = str(tmp_path / "shipments")
    df.write.format("delta").save(path)
    stored = spark.read.format("delta").load(path)
    assertDataFrameEqual(stored, expected)
    assert stored.schema["weight_mg"].metadata.get("comment") == (
        "Weight in milligrams; uint64 so that 2^64-1 is a legal value."
    )
