"""One silver micro-batch end to end on a bronze table built from real serializer frames.

No Kafka: the bronze Delta table is written directly; SilverBatch is the very function the
streaming query calls in foreachBatch.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from codec import SchemaResolver, open_registry, write_frame
from lakehouse.catalog import CatalogDatabases
from lakehouse.layout import Layout
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant
from pipelines.silver import SilverBatch
from pipelines.silver.driver_pass import DRIVER_RECORDS, SmallBatch, collect_small
from tests.support.delta_log import files_added
from tests.support.silver_testkit import bronze_row, make_order, poison_values, write_bronze

TOPIC = "ut.orders"
ORDER = "silvertest.v1.Order"
ITEM = "silvertest.v1.Order.LineItem"
PING = "silvertest.v1.Ping"


def _retarget(frame: bytes, schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + frame[5:]


@pytest.fixture(scope="module")
def mixed(producer: Any, versions: Any, registry: Any) -> dict[str, Any]:
    """A mixed bronze batch: offsets -> expected destination (table or reason code)."""
    v1, v2, vc = versions["v1"], versions["v2"], versions["conflict"]
    rows: list[tuple[Any, ...]] = []
    expect: dict[int, str] = {}

    def add(value: bytes | None, dest: str, **kw: Any) -> None:
        off = len(rows)
        rows.append(bronze_row(value, TOPIC, off, **kw))
        expect[off] = dest

    for i in range(6):
        add(producer.frame(make_order(v1, i), TOPIC), ORDER)
    for i in range(6, 9):
        add(producer.frame(make_order(v2, i, with_v2=True), TOPIC), ORDER)
    for i in range(2):
        add(producer.frame(v1.LineItem(sku=f"s{i}", quantity=i + 1), TOPIC), ITEM)
    for i in range(2):
        key = producer.frame(v1.Ping(id=f"key-{i}"), TOPIC, is_key=True)
        add(producer.frame(v1.Ping(id=f"p{i}"), TOPIC), PING, key=key)
    add(producer.frame(v1.Ping(id="plainkey"), TOPIC), PING, key=b"plain-key")
    v1_frame = producer.frame(make_order(v1, 100), TOPIC)
    v1_id = struct.unpack(">I", v1_frame[1:5])[0]
    payload = v1_frame[6:]
    for code, value in poison_values(payload).items():
        add(value, "BAD_MAGIC" if code == "PLAIN_JSON" else code)
    add(v1_frame[:5] + b"\x02\x12" + payload, "UNKNOWN_MESSAGE")  # indexes [9]
    add(v1_frame[:6] + b"\xff\xff\xff\xff", "BAD_PAYLOAD")
    v2_frame = producer.frame(make_order(v2, 101, with_v2=True), TOPIC)
    add(_retarget(v2_frame, v1_id), "UNKNOWN_FIELDS")  # v2 bytes, v1 writer schema
    avro_id = registry.register("ut.avro-value", '{"type": "string"}', schema_type="AVRO")
    add(_retarget(v1_frame, avro_id), "NOT_PROTOBUF")
    for i in range(2):
        add(producer.frame(make_order(vc, 200 + i, conflict=True), TOPIC), "SCHEMA_CONFLICT")
    return {"rows": rows, "expect": expect, "v1_id": v1_id}


def _run_batch(
    spark: Any,
    lake: str,
    bronze: str,
    registry: Any,
    batch_id: int,
    app_id: str,
    database: str = "",
    driver_records: int = DRIVER_RECORDS,
) -> SilverBatch:
    """One silver batch; its tables registered in ``database`` when one is named."""
    batch = SilverBatch(
        spark,
        lake,
        app_id,
        SchemaResolver(open_registry(registry.url)),
        databases=CatalogDatabases(silver=database, bronze="", quarantine="", quality=""),
        driver_records=driver_records,
    )
    batch(spark.read.format("delta").load(bronze), batch_id)
    return batch


@pytest.fixture(scope="module")
def processed(spark: Any, tmp_path_factory: Any, mixed: Any, registry: Any) -> dict[str, Any]:
    """The mixed batch processed once (batch 0), shared by the read-only tests below."""
    lake = str(tmp_path_factory.mktemp("silver") / "lake")
    bronze = f"{lake}/bronze/ut_orders"
    write_bronze(spark, bronze, mixed["rows"])
    app_id = "11111111-1111-1111-1111-111111111111"
    batch = _run_batch(spark, lake, bronze, registry, 0, app_id, database="silver_ut")
    return {"lake": lake, "bronze": bronze, "batch": batch, "app_id": app_id}


def _destinations(spark: Any, lake: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for name in (ORDER, ITEM, PING):
        path = f"{lake}/silver/{table_name_for(name)}"
        for r in spark.read.format("delta").load(path).select("_kafka_offset").collect():
            found.setdefault(r[0], []).append(name)
    for r in (
        spark.read.format("delta")
        .load(Layout(lake).quarantine)
        .select("_kafka_offset", "reason_code")
        .collect()
    ):
        found.setdefault(r[0], []).append(r[1])
    return found


def _quarantine_rows(spark: Any, lake: str) -> list[tuple[Any, ...]]:
    """Every quarantine row but its ``_quarantined_at`` (the batch's wall clock)."""
    q = spark.read.format("delta").load(Layout(lake).quarantine).drop("_quarantined_at")
    return sorted((tuple(r) for r in q.collect()), key=repr)


def test_every_record_lands_once_with_the_right_reason(
    spark: Any, processed: Any, mixed: Any, registry: Any
) -> None:
    lake, bronze, batch = processed["lake"], processed["bronze"], processed["batch"]

    found = _destinations(spark, lake)
    assert found == {off: [dest] for off, dest in mixed["expect"].items()}
    report = check_invariant(spark, lake)
    assert report.holds, report.summary()
    assert report.bronze_records == len(mixed["rows"])
    stats = batch.history[0]
    assert stats.records == len(mixed["rows"])
    assert stats.silver == {
        table_name_for(ORDER): 9,
        table_name_for(ITEM): 2,
        table_name_for(PING): 3,
    }
    assert stats.quarantined["SCHEMA_CONFLICT"] == 2 and stats.quarantined["BAD_MAGIC"] == 2

    # the same batch again (a retry after a crash): Delta skips it everywhere
    _run_batch(spark, lake, bronze, registry, 0, processed["app_id"])
    assert _destinations(spark, lake) == found
    assert check_invariant(spark, lake).holds


def test_a_small_batch_appends_one_file_per_table(processed: Any) -> None:
    """The order table's rows are a union of two schema versions, and the quarantine's a
    union of bad frames, failed resolutions, conflicts and each version's decode failures,
    each part over the bronze batch's partitions; each append writes one file."""
    lake = Path(processed["lake"])
    order_table = lake / "silver" / table_name_for(ORDER)
    quarantine = Path(Layout(str(lake)).quarantine)
    assert files_added(order_table) == [1]
    assert files_added(quarantine) == [1]


def test_typed_columns_lineage_and_evolution(spark: Any, processed: Any, mixed: Any) -> None:
    lake = processed["lake"]
    orders = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(ORDER)}")
    types = dict(orders.dtypes)
    assert types["points"] == "decimal(20,0)" and types["status"] == "string"
    assert types["created_at"] == "timestamp" and types["_kafka_offset"] == "bigint"
    assert "note" in types  # v2 added a column; v1 rows read null there
    assert "gift_message" in types["items"]
    rows = {r["order_id"]: r for r in orders.collect()}
    assert sorted(rows) == [f"ord-{i:05d}" for i in range(9)]
    assert rows["ord-00000"]["points"] == Decimal(2**64 - 1)
    assert rows["ord-00001"]["status"] == "PAID" and rows["ord-00002"]["status"] == "PLACED"
    assert rows["ord-00003"]["note"] is None and rows["ord-00007"]["note"] == "note 7"
    assert rows["ord-00007"]["items"][0]["gift_message"] == "hello"
    assert rows["ord-00004"]["items"][0]["price"]["units"] == 104
    assert rows["ord-00004"]["attributes"] == {"channel": "app"}
    r = rows["ord-00002"]
    assert (r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"]) == (TOPIC, 0, 2)
    assert r["_schema_id"] == mixed["v1_id"] and r["_schema_guid"] is None
    assert r["_message_type"] == ORDER and r["_processed_at"] is not None
    assert r["_kafka_timestamp"] is not None

    pings = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(PING)}")
    by_id = {p["id"]: p for p in pings.collect()}
    assert by_id["p0"]["_key_decoded"] == '{"id":"key-0"}'
    assert (
        by_id["plainkey"]["_key"] == bytearray(b"plain-key")
        and by_id["plainkey"]["_key_decoded"] is None
    )

    # registered in the catalog by name
    assert spark.sql(f"SELECT count(*) FROM silver_ut.{table_name_for(ITEM)}").first()[0] == 2


def test_quarantine_rows_keep_raw_bytes_and_identifiers(
    spark: Any, processed: Any, mixed: Any
) -> None:
    lake = processed["lake"]
    q = spark.read.format("delta").load(Layout(lake).quarantine)
    by_code = {r["reason_code"]: r for r in q.collect()}
    src = {row[4]: row for row in mixed["rows"]}
    for r in by_code.values():
        assert r["value"] == (
            bytearray(src[r["_kafka_offset"]][1])
            if src[r["_kafka_offset"]][1] is not None
            else None
        )
        assert r["reason"] and r["stage"] and r["_quarantined_at"] is not None
        assert r["replayed_at"] is None and r["replay_outcome"] is None
    assert by_code["BAD_MAGIC"]["stage"] == "framing"
    assert (
        by_code["UNKNOWN_SCHEMA"]["stage"] == "registry"
        and by_code["UNKNOWN_SCHEMA"]["_schema_id"] == 999999
    )
    assert by_code["UNKNOWN_MESSAGE"]["message_indexes"] == [9]
    assert (
        by_code["BAD_PAYLOAD"]["stage"] == "payload"
        and by_code["BAD_PAYLOAD"]["_message_type"] == ORDER
    )
    assert by_code["UNKNOWN_FIELDS"]["_schema_id"] == mixed["v1_id"]
    assert (
        by_code["SCHEMA_CONFLICT"]["stage"] == "schema"
        and "points" in by_code["SCHEMA_CONFLICT"]["reason"]
    )


def test_conflicting_version_leaves_table_unchanged(
    spark: Any, tmp_path: Any, mixed: Any, registry: Any
) -> None:
    lake = str(tmp_path / "lake")
    first = f"{lake}/bronze/first"
    write_bronze(spark, first, [r for r in mixed["rows"] if mixed["expect"][r[4]] == ORDER])
    _run_batch(spark, lake, first, registry, 0, "44444444-4444-4444-4444-444444444444")
    path = f"{lake}/silver/{table_name_for(ORDER)}"
    before_schema = spark.read.format("delta").load(path).schema
    before_version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.max("version")).first()[0]

    second = f"{lake}/bronze/second"
    write_bronze(
        spark, second, [r for r in mixed["rows"] if mixed["expect"][r[4]] == "SCHEMA_CONFLICT"]
    )
    _run_batch(spark, lake, second, registry, 0, "55555555-5555-5555-5555-555555555555")
    assert spark.read.format("delta").load(path).schema == before_schema
    after_version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.max("version")).first()[0]
    assert after_version == before_version
    codes = [
        r[0]
        for r in spark.read.format("delta")
        .load(Layout(lake).quarantine)
        .select("reason_code")
        .collect()
    ]
    assert codes == ["SCHEMA_CONFLICT", "SCHEMA_CONFLICT"]
    assert check_invariant(spark, lake).holds


def test_invariant_names_offenders(spark: Any, tmp_path: Any, mixed: Any, registry: Any) -> None:
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_orders"
    small = [r for r in mixed["rows"] if mixed["expect"][r[4]] in (ITEM, PING, "BAD_MAGIC")]
    write_bronze(spark, bronze, small)
    _run_batch(spark, lake, bronze, registry, 0, "66666666-6666-6666-6666-666666666666")
    # a bronze record nothing processed yet, and a silver row duplicated by hand
    write_bronze(spark, bronze, [bronze_row(b"\x00", TOPIC, 9999)])
    item_path = f"{lake}/silver/{table_name_for(ITEM)}"
    spark.read.format("delta").load(item_path).limit(1).write.format("delta").mode("append").save(
        item_path
    )
    report = check_invariant(spark, lake)
    assert not report.holds
    assert report.missing == 1 and report.offenders["missing"][0]["offset"] == 9999
    assert report.duplicated == 1 and report.in_both == 0 and report.orphans == 0
    assert report.offenders["duplicated"][0]["found_in"] == [table_name_for(ITEM)] * 2


def _silver_rows(spark: Any, lake: str) -> dict[str, list[Any]]:
    out = {}
    for name in (ORDER, ITEM, PING):
        df = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(name)}")
        out[name] = sorted(df.drop("_processed_at").collect(), key=lambda r: r["_kafka_offset"])
    return out


@pytest.mark.parametrize(
    "options",
    [
        {"driver_records": 0},
        {"driver_records": 0, "cache_bronze": True},
        {"driver_records": 0, "native": False},
        {"native": False},
    ],
    ids=["spark-path", "spark-path-cached", "spark-path-upb", "driver-path-upb"],
)
def test_the_batch_lands_the_same_on_either_path_with_or_without_the_compiled_decoder(
    spark: Any, tmp_path: Any, mixed: Any, registry: Any, processed: Any, options: Any
) -> None:
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_orders"
    write_bronze(spark, bronze, mixed["rows"])
    resolver = SchemaResolver(open_registry(registry.url))
    batch = SilverBatch(spark, lake, "22222222-2222-2222-2222-222222222222", resolver, **options)
    batch(spark.read.format("delta").load(bronze), 0)
    assert _destinations(spark, lake) == _destinations(spark, processed["lake"])
    assert _silver_rows(spark, lake) == _silver_rows(spark, processed["lake"])
    # raw bytes, reasons and schema columns alike, whether picked as Arrow or by Spark
    assert _quarantine_rows(spark, lake) == _quarantine_rows(spark, processed["lake"])
    assert batch.history[0].silver == processed["batch"].history[0].silver
    assert batch.history[0].quarantined == processed["batch"].history[0].quarantined


@pytest.mark.parametrize("driver_records", [0, DRIVER_RECORDS], ids=["spark-path", "driver-path"])
def test_guid_and_header_frames_land_like_id_frames(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any, driver_records: int
) -> None:
    """The same v1 order framed three ways (schema id prefix, GUID prefix, schema-id header,
    the last framed on the Python workers) lands three times in one table, typed alike."""
    v1 = versions["v1"]
    frame = producer.frame(make_order(v1, 7), "ut.guid")
    v1_id = struct.unpack(">I", frame[1:5])[0]
    guid = registry.guid_of(v1_id)
    payload = frame[6:]
    rows = [
        bronze_row(frame, "ut.guid", 0),
        bronze_row(write_frame(guid, (0,), payload), "ut.guid", 1),
        bronze_row(payload, "ut.guid", 2, headers=[("__value_schema_id", frame[:6])]),
    ]
    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_guid", rows)
    batch = _run_batch(
        spark,
        lake,
        f"{lake}/bronze/ut_guid",
        registry,
        0,
        "33333333-3333-3333-3333-333333333333",
        driver_records=driver_records,
    )
    table = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(ORDER)}")
    got = {r["_kafka_offset"]: r for r in table.collect()}
    assert sorted(got) == [0, 1, 2]
    assert [got[i]["_schema_id"] for i in range(3)] == [v1_id, None, v1_id]
    assert got[1]["_schema_guid"] == guid
    message = [c for c in table.columns if not c.startswith("_")]
    assert [[got[i][c] for c in message] for i in (1, 2)] == [[got[0][c] for c in message]] * 2
    assert batch.history[0].schema_keys == 2  # id:<v1>|0 and guid:<v1>|0
    assert check_invariant(spark, lake).holds
    assert batch.history[0].quarantined == {}


def test_a_batch_without_quarantine_rows_commits_nothing_to_the_quarantine(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    """The first clean batch creates the quarantine table (readers find it, empty); later
    clean batches leave it alone (an empty append would be a Delta commit for nothing), and a
    batch with a poison record appends it."""
    from delta.tables import DeltaTable

    v1 = versions["v1"]
    lake = str(tmp_path / "lake")
    quarantine = Layout(lake).quarantine
    app_id = "33333333-3333-3333-3333-333333333333"
    orders = [producer.frame(make_order(v1, i), TOPIC) for i in range(4)]

    def run(batch_id: int, values: list[bytes]) -> SilverBatch:
        bronze = f"{lake}/bronze/ut_batch{batch_id}"
        write_bronze(spark, bronze, [bronze_row(v, TOPIC, o) for o, v in enumerate(values)])
        return _run_batch(spark, lake, bronze, registry, batch_id, app_id)

    def quarantine_version() -> int:
        return int(DeltaTable.forPath(spark, quarantine).history(1).collect()[0]["version"])

    run(0, orders[:2])
    created = quarantine_version()
    assert spark.read.format("delta").load(quarantine).count() == 0
    clean = run(1, orders[2:])
    assert quarantine_version() == created
    assert clean.history[0].silver == {table_name_for(ORDER): 2}
    assert clean.history[0].quarantined == {}
    steps = clean.history[0].steps  # where the batch's time went, step by step
    assert list(steps) == [
        *("collect", "frame", "resolve", "plan", "quarantine", "decode", "check", "write")
    ]
    assert 0 < sum(steps.values()) <= clean.history[0].seconds + 0.01  # each rounded to 1 ms

    poisoned = run(2, [orders[0], b"not a frame"])
    assert quarantine_version() == created + 1
    assert poisoned.history[0].quarantined == {"BAD_MAGIC": 1}
    rows = spark.read.format("delta").load(quarantine).select("reason_code").collect()
    assert [r[0] for r in rows] == ["BAD_MAGIC"]


def test_small_batches_are_interpreted_large_ones_generated_and_both_land_the_same(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    """The batch's record count chooses how its expressions are evaluated and whether it runs
    with adaptive execution, on the query's own session (the micro-batch's), and either way the
    same rows land; a batch read through the job's own session leaves that session alone.
    (The suite's sessions are launched interpreted and without adaptive execution, so the
    choice is forced open here, and the launch settings a large batch goes back to are those
    of a session that set others.)"""
    from pipelines.silver.evaluation import (
        ADAPTIVE,
        FACTORY_MODE,
        GENERATED,
        INTERPRETED,
        SHUFFLE_PARTITIONS,
        ExpressionEvaluation,
    )

    launched = ExpressionEvaluation.for_session(spark)
    assert launched.fixed and launched.adaptive_fixed  # tests/spark-conf sets both
    main = spark.newSession()  # the job's session, launched with adaptive execution
    main.conf.set(ADAPTIVE, "true")
    main.conf.set(SHUFFLE_PARTITIONS, "7")
    evaluation = ExpressionEvaluation(main, fixed=False, below=3, adaptive_fixed=False)
    # a small batch's shuffles: a partition per 10,000 records, so one here
    small = {FACTORY_MODE: INTERPRETED, ADAPTIVE: "false", SHUFFLE_PARTITIONS: "1"}
    large = {FACTORY_MODE: GENERATED, ADAPTIVE: "true", SHUFFLE_PARTITIONS: "7"}
    assert [evaluation.settings_for(n) for n in (2, 3)] == [small, large]
    v1 = versions["v1"]
    lake = str(tmp_path / "lake")
    query_session = spark.newSession()  # launched interpreted, like the job's
    batch = SilverBatch(
        main,
        lake,
        "44444444-4444-4444-4444-444444444444",
        SchemaResolver(open_registry(registry.url)),
    )
    batch.evaluation = evaluation
    seen = []
    batches = [(3, query_session), (2, main), (2, query_session)]
    for batch_id, (records, session) in enumerate(batches):
        bronze = f"{lake}/bronze/ut_eval{batch_id}"
        rows = [
            bronze_row(producer.frame(make_order(v1, 10 * batch_id + i), TOPIC), TOPIC, i)
            for i in range(records)
        ]
        write_bronze(spark, bronze, rows)
        batch(session.read.format("delta").load(bronze), batch_id)
        seen.append([{key: s.conf.get(key) for key in large} for s in (query_session, main)])
    main_as_set = {FACTORY_MODE: spark.conf.get(FACTORY_MODE), ADAPTIVE: "true"}
    main_as_set[SHUFFLE_PARTITIONS] = "7"
    assert seen == [[large, main_as_set], [large, main_as_set], [small, main_as_set]]
    assert [h.silver for h in batch.history] == [{table_name_for(ORDER): n} for n in (3, 2, 2)]
    silver = spark.read.format("delta").load(Layout(lake).silver_table(table_name_for(ORDER)))
    offsets = sorted(r[0] for r in silver.select("_kafka_offset").collect())
    assert offsets == [0, 0, 0, 1, 1, 1, 2]


def test_the_decode_pass_counts_each_versions_failures(
    spark: Any, tmp_path: Any, mixed: Any, registry: Any
) -> None:
    """Kept as a local checkpoint, the decode pass counts each version's failed records as it
    is computed (the batch then leaves out the quarantine rows of versions without any): the
    counts are the rows with a decode code, BAD_PAYLOAD and UNKNOWN_FIELDS here."""
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_orders"
    write_bronze(spark, bronze, mixed["rows"])
    batch = SilverBatch(spark, lake, "app", SchemaResolver(open_registry(registry.url)))
    assert batch.keeps_as_leaf  # the suite's local session: the pass is kept by a job
    persisted: list[Any] = []
    try:
        counts, framed = batch._frame(spark.read.format("delta").load(bronze), persisted)
        resolved = batch._resolve(counts)
        plans = batch._plan(resolved)
        large = batch._large(counts, framed, persisted)
        decoded = batch._decode_versions(large, plans, resolved.key_types)
        failed = {key: d.failures for key, d in decoded.items()}
        rows = {key: d.rows.where("_decode_code IS NOT NULL").count() for key, d in decoded.items()}
        bronze_df = spark.read.format("delta").load(bronze)
        small = SmallBatch.frame(bronze_df, collect_small(bronze_df, DRIVER_RECORDS))
        assert small is not None and small.counts == counts
        in_driver = batch._decode_versions(small, plans, resolved.key_types)
        failed_in_driver = {key: d.failures for key, d in in_driver.items()}
    finally:
        batch._release(persisted)
    assert failed == rows
    assert sorted(failed.values()) == [0] * (len(failed) - 1) + [2]
    assert failed_in_driver == failed


@pytest.mark.parametrize("driver_records", [0, DRIVER_RECORDS], ids=["spark-path", "driver-path"])
def test_a_table_whose_records_all_fail_is_not_created(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any, driver_records: int
) -> None:
    """Every Ping of the batch fails to decode: its records go to quarantine, and no Ping table
    is created or written (nor checked) for a batch that has no row for it."""
    v1 = versions["v1"]
    ping = producer.frame(v1.Ping(id="p"), TOPIC)
    rows = [bronze_row(producer.frame(make_order(v1, i), TOPIC), TOPIC, i) for i in range(2)]
    rows += [bronze_row(ping[:6] + b"\xff\xff\xff\xff", TOPIC, 2 + i) for i in range(2)]
    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_orders", rows)
    batch = SilverBatch(
        spark,
        lake,
        "app",
        SchemaResolver(open_registry(registry.url)),
        driver_records=driver_records,
    )
    batch(spark.read.format("delta").load(f"{lake}/bronze/ut_orders"), 0)
    assert batch.history[0].silver == {table_name_for(ORDER): 2}
    assert batch.history[0].quarantined == {"TRUNCATED": 2}  # the payload's codec error
    assert not Path(Layout(lake).silver_table(table_name_for(PING))).exists()
    assert check_invariant(spark, lake).holds


@pytest.mark.parametrize("driver_records", [0, DRIVER_RECORDS], ids=["spark-path", "driver-path"])
def test_an_empty_batch_writes_nothing(
    spark: Any, tmp_path: Any, mixed: Any, driver_records: int
) -> None:
    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_orders", mixed["rows"][:1])
    batch = SilverBatch(
        spark,
        lake,
        "app",
        SchemaResolver(open_registry("http://127.0.0.1:9")),
        driver_records=driver_records,
    )
    batch(spark.read.format("delta").load(f"{lake}/bronze/ut_orders").where("false"), 0)
    assert [(h.records, h.silver, h.quarantined) for h in batch.history] == [(0, {}, {})]
    assert not Path(Layout(lake).silver).exists() and not Path(Layout(lake).quarantine).exists()
