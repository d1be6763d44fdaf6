"""Bronze transforms and the per-topic writer on a local Spark session, without Kafka."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.testing import assertDataFrameEqual

from lakehouse.bronze_columns import BRONZE_TABLE_COLUMNS
from lakehouse.checkpoints import load_app_id, query_id
from lakehouse.layout import APP_ID_FILE
from pipelines.bronze import read_kafka, to_bronze_rows
from pipelines.bronze_routing import TopicRouter, one_table, topics_in_batch
from pipelines.settings import parse_config
from tests.support.checkpoints import write_checkpoint_batch

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", HEADERS),
    ]
)
# docs/contracts.md, "Lakehouse layout", bronze
CONTRACT_TYPES = {
    "key": BinaryType(),
    "value": BinaryType(),
    "topic": StringType(),
    "partition": IntegerType(),
    "offset": LongType(),
    "timestamp": TimestampType(),
    "timestampType": IntegerType(),
    "headers": HEADERS,
    "_ingested_at": TimestampType(),
    "_ingest_date": DateType(),
}
TS = dt.datetime(2026, 1, 2, 3, 4, 5)


def kafka_rows(spark: Any, topics: list[str], per_topic: int = 3) -> Any:
    rows = [
        (
            None if i == 0 else f"k{i}".encode(),
            bytes([0, 255, i]) + topic.encode(),
            topic,
            i % 2,
            i,
            TS,
            0,
            [("trace", b"\x00\x01"), ("empty", None)],
        )
        for topic in topics
        for i in range(per_topic)
    ]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def test_bronze_rows_follow_the_contract(spark: Any) -> None:
    source = kafka_rows(spark, ["t.one"])
    out = to_bronze_rows(source)
    assert tuple(out.columns) == BRONZE_TABLE_COLUMNS
    assert {f.name: f.dataType for f in out.schema.fields} == CONTRACT_TYPES
    rows = out.collect()
    assert len(rows) == 3
    for row in rows:
        assert row._ingest_date == row._ingested_at.date()
        assert row._ingested_at > dt.datetime(2025, 1, 1)
    # the Kafka record itself is untouched, byte for byte
    assertDataFrameEqual(out.select(*KAFKA_SCHEMA.fieldNames()), source)


def test_read_kafka_gives_a_streaming_frame_with_kafka_schema(spark: Any) -> None:
    cfg = parse_config({"kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["x"]}})
    df = read_kafka(spark, cfg)
    assert df.isStreaming
    assert df.schema == KAFKA_SCHEMA
    assert {f.name: f.dataType for f in to_bronze_rows(df).schema.fields} == CONTRACT_TYPES


def in_folder(folder: Path) -> Any:
    return lambda table: str(folder / table)


def table(spark: Any, path: Path) -> list[Row]:
    return spark.read.format("delta").load(str(path)).orderBy("topic", "offset").collect()


def test_router_writes_each_topic_to_its_table_once(spark: Any, tmp_path: Path) -> None:
    router = TopicRouter(
        table_path=in_folder(tmp_path), app_id="app-1", partition_by=("_ingest_date",)
    )
    batch = to_bronze_rows(kafka_rows(spark, ["shop.orders", "shop.users"]))
    router(batch, 0)
    router(batch, 0)  # a replayed batch (crash after the write, before the commit)
    orders = table(spark, tmp_path / "shop_orders")
    users = table(spark, tmp_path / "shop_users")
    assert [(r.topic, r.offset) for r in orders] == [("shop.orders", i) for i in range(3)]
    assert [(r.topic, r.offset) for r in users] == [("shop.users", i) for i in range(3)]
    assert orders[0].key is None and orders[1].key == b"k1"
    assert orders[2].value == bytes([0, 255, 2]) + b"shop.orders"
    assert [(h.key, h.value) for h in orders[0].headers] == [
        ("trace", b"\x00\x01"),
        ("empty", None),
    ]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{tmp_path / 'shop_orders'}`").first()
    assert detail.partitionColumns == ["_ingest_date"]

    router(to_bronze_rows(kafka_rows(spark, ["shop.orders"], per_topic=5)), 1)
    assert len(table(spark, tmp_path / "shop_orders")) == 3 + 5
    assert len(table(spark, tmp_path / "shop_users")) == 3


def test_topics_sharing_a_table_all_land(spark: Any, tmp_path: Path) -> None:
    # "a.b" and "a_b" both map to table a_b: one append per table, else Delta would skip the
    # second append of the same (app id, batch id) as a duplicate.
    router = TopicRouter(table_path=in_folder(tmp_path), app_id="app-2", partition_by=())
    router(to_bronze_rows(kafka_rows(spark, ["a.b", "a_b", "other"])), 0)
    rows = table(spark, tmp_path / "a_b")
    assert sorted({r.topic for r in rows}) == ["a.b", "a_b"]
    assert len(rows) == 6
    assert len(table(spark, tmp_path / "other")) == 3


def test_known_single_topic_writes_without_listing(spark: Any, tmp_path: Path) -> None:
    router = TopicRouter(
        table_path=in_folder(tmp_path), app_id="app-3", partition_by=(), known_topic="Solo.Topic"
    )
    router(to_bronze_rows(kafka_rows(spark, ["Solo.Topic"])), 4)
    router(to_bronze_rows(kafka_rows(spark, ["Solo.Topic"])), 4)
    assert len(table(spark, tmp_path / "solo_topic")) == 3


def test_another_app_id_is_not_deduplicated(spark: Any, tmp_path: Path) -> None:
    batch = to_bronze_rows(kafka_rows(spark, ["t"]))
    TopicRouter(table_path=in_folder(tmp_path), app_id="old", partition_by=())(batch, 0)
    TopicRouter(table_path=in_folder(tmp_path), app_id="new", partition_by=())(batch, 0)
    assert len(table(spark, tmp_path / "t")) == 6


def test_app_id_is_kept_in_the_checkpoint(spark: Any, tmp_path: Path) -> None:
    first = load_app_id(spark, str(tmp_path / "ck"))
    assert load_app_id(spark, str(tmp_path / "ck")) == first
    assert (tmp_path / "ck" / APP_ID_FILE).read_text() == first
    assert load_app_id(spark, str(tmp_path / "ck2")) != first
    (tmp_path / "ck3").mkdir()
    (tmp_path / "ck3" / APP_ID_FILE).write_text("garbage")
    with pytest.raises(RuntimeError, match="damaged"):
        load_app_id(spark, str(tmp_path / "ck3"))


def test_a_checkpoint_a_query_ran_on_keeps_that_query_s_id_as_its_app_id(
    spark: Any, tmp_path: Path
) -> None:
    # Spark's Delta sink committed that query's batches under its id
    ck = tmp_path / "sink"
    ck.mkdir()
    (ck / "metadata").write_text('{"id":"0b6f4c9e-4b1a-4d43-9a57-2f2f6c1e8d10"}\n')
    assert query_id(spark, str(ck)) == "0b6f4c9e-4b1a-4d43-9a57-2f2f6c1e8d10"
    assert load_app_id(spark, str(ck)) == "0b6f4c9e-4b1a-4d43-9a57-2f2f6c1e8d10"
    assert query_id(spark, str(tmp_path / "new")) is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metadata").write_text('{"name": "x"}\n')
    with pytest.raises(RuntimeError, match="no query id"):
        load_app_id(spark, str(tmp_path / "bad"))


def test_one_table_takes_every_topic(spark: Any, tmp_path: Path) -> None:
    batch = to_bronze_rows(kafka_rows(spark, ["a.x", "b-y"]))
    router = TopicRouter(
        table_path=in_folder(tmp_path), app_id="app", partition_by=(), table_of=one_table("all")
    )
    router(batch, 0)
    router(batch, 0)  # a replay: skipped
    landed = table(spark, tmp_path / "all")
    assert len(landed) == 6 and {r["topic"] for r in landed} == {"a.x", "b-y"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all"]


def write_initial_offsets(checkpoint: Path, offsets: dict) -> None:
    # Spark's Kafka source writes a 0 byte before the version line.
    folder = checkpoint / "sources" / "0"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0").write_bytes(b"\x00v1\n" + json.dumps(offsets).encode())


def test_topics_in_batch_from_the_offset_log(spark: Any, tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    write_initial_offsets(ck, {"a": {"0": 0, "1": 0}, "b": {"0": 5}})
    write_checkpoint_batch(ck, 0, {"a": {"0": 3, "1": 0}, "b": {"0": 5}}, committed=False)
    write_checkpoint_batch(
        ck, 1, {"a": {"0": 3, "1": 0}, "b": {"0": 9}, "new": {"0": 0}}, committed=False
    )
    write_checkpoint_batch(
        ck, 2, {"a": {"0": 3, "1": 2}, "b": {"0": 9}, "new": {"0": 0, "1": 4}}, committed=False
    )
    assert topics_in_batch(spark, str(ck), 0) == {"a"}
    assert topics_in_batch(spark, str(ck), 1) == {"b", "new"}  # a new topic always counts
    assert topics_in_batch(spark, str(ck), 2) == {"a", "new"}
    assert topics_in_batch(spark, str(ck), 3) is None  # no such batch
    (ck / "offsets" / "4").write_text("v2\n{}\n{}")
    assert topics_in_batch(spark, str(ck), 4) is None  # a format it does not know
    (ck / "offsets" / "5").write_text('v1\n{}\n{"a": "x"}')
    assert topics_in_batch(spark, str(ck), 5) is None


def test_router_uses_the_offset_log_and_refuses_stray_topics(spark: Any, tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    write_initial_offsets(ck, {"x.one": {"0": 0}, "x.two": {"0": 0}})
    write_checkpoint_batch(ck, 0, {"x.one": {"0": 3}, "x.two": {"0": 0}}, committed=False)
    written: list[dict[str, list[str]]] = []  # what on_tables heard (bronze registers those)
    router = TopicRouter(
        table_path=in_folder(tmp_path / "t"),
        app_id="app-5",
        partition_by=(),
        checkpoint=str(ck),
        on_tables=written.append,
    )
    router(to_bronze_rows(kafka_rows(spark, ["x.one"])), 0)
    assert len(table(spark, tmp_path / "t" / "x_one")) == 3
    assert not (tmp_path / "t" / "x_two").exists()
    assert written == [{"x_one": ["x.one"]}]

    write_checkpoint_batch(ck, 1, {"x.one": {"0": 6}, "x.two": {"0": 0}}, committed=False)
    with pytest.raises(Exception, match="outside this batch's offset ranges"):
        router(to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"])), 1)
    assert len(table(spark, tmp_path / "t" / "x_one")) == 3  # nothing half-written

    write_checkpoint_batch(ck, 2, {"x.one": {"0": 9}, "x.two": {"0": 3}}, committed=False)
    router(to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"])), 2)
    assert len(table(spark, tmp_path / "t" / "x_one")) == 6
    assert len(table(spark, tmp_path / "t" / "x_two")) == 3
    assert written[1:] == [{"x_one": ["x.one"], "x_two": ["x.two"]}]  # not the failed batch


def engines(spark: Any, path: Path) -> list[str]:
    """The engine of each commit of the table at ``path`` after its first."""
    from delta.tables import DeltaTable

    commits = DeltaTable.forPath(spark, str(path)).history().orderBy("version").collect()
    return [c.engineInfo.split(":")[0].split("/")[0] for c in commits[1:]]


def test_a_small_batch_is_read_once_and_appended_by_delta_rs(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ck = tmp_path / "ck"
    write_initial_offsets(ck, {"x.one": {"0": 0}, "x.two": {"0": 0}})
    router = TopicRouter(
        table_path=in_folder(tmp_path / "t"),
        app_id="app-6",
        partition_by=("_ingest_date",),
        checkpoint=str(ck),
    )
    write_checkpoint_batch(ck, 0, {"x.one": {"0": 3}, "x.two": {"0": 3}}, committed=False)
    router(to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"])), 0)  # creates the tables
    write_checkpoint_batch(ck, 1, {"x.one": {"0": 6}, "x.two": {"0": 6}}, committed=False)
    batch = to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"]))
    router(batch, 1)
    router(batch, 1)  # a replay: skipped by both tables
    one, two = tmp_path / "t" / "x_one", tmp_path / "t" / "x_two"
    assert engines(spark, one)[-1] == engines(spark, two)[-1] == "delta-rs"
    assert [(r.topic, r.offset) for r in table(spark, one)] == [
        ("x.one", i) for i in (0, 0, 1, 1, 2, 2)
    ]
    assert len(table(spark, two)) == 6
    assert table(spark, one)[0].headers == table(spark, one)[1].headers  # bytes as Spark wrote

    import lakehouse.driver_append

    monkeypatch.setattr(lakehouse.driver_append, "MAX_RECORDS", 5)  # batch 2 spans 6 records
    write_checkpoint_batch(ck, 2, {"x.one": {"0": 9}, "x.two": {"0": 9}}, committed=False)
    router(to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"])), 2)
    assert engines(spark, one)[-1] != "delta-rs"
    assert len(table(spark, one)) == 9


def test_a_batch_planned_with_more_topics_lands_by_its_offset_log(
    spark: Any, tmp_path: Path
) -> None:
    """Bronze restarted on one topic (``known_topic``) runs again the batch its earlier run
    planned over two: each record lands in its own topic's table, as planned."""
    ck = tmp_path / "ck"
    write_initial_offsets(ck, {"x.one": {"0": 0}, "x.two": {"0": 0}})
    write_checkpoint_batch(ck, 0, {"x.one": {"0": 3}, "x.two": {"0": 3}}, committed=False)
    router = TopicRouter(
        table_path=in_folder(tmp_path / "t"),
        app_id="app-6",
        partition_by=(),
        known_topic="x.one",
        checkpoint=str(ck),
    )
    router(to_bronze_rows(kafka_rows(spark, ["x.one", "x.two"])), 0)
    assert {r.topic for r in table(spark, tmp_path / "t" / "x_one")} == {"x.one"}
    assert [r.offset for r in table(spark, tmp_path / "t" / "x_two")] == [0, 1, 2]
