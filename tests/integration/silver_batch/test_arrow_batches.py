"""The Arrow byte limit of a silver batch (``pipelines.silver.arrow_batches``): the bound of a
record's bytes read with the frame heads, and the limit the batch sets on its query's
session by it, on real frames and a real query session."""

from __future__ import annotations

from typing import Any

from codec import SchemaResolver, open_registry
from lakehouse.layout import Layout
from pipelines.naming import table_name_for
from pipelines.silver import SilverBatch
from pipelines.silver.arrow_batches import MAX_BYTES, UNBOUNDED, ArrowBatches, record_bytes
from pipelines.silver.decode import DECODE_INPUT
from pipelines.silver.frame_heads import head_counts
from pipelines.silver.framing import Heads
from tests.support.silver_testkit import BRONZE_DDL, bronze_row, make_order, write_bronze

TOPIC = "ab.orders"
ORDER = "silvertest.v1.Order"


def test_the_bound_holds_each_record_as_a_decode_pass_ships_it(
    spark: Any, producer: Any, versions: Any
) -> None:
    """Each record's Arrow bytes, with every column a decode pass can ship (framed keys
    included), are at most its ``record_bytes``; the heads give the batch's largest."""
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 1), TOPIC)
    key = producer.frame(v1.Ping(id="k-1"), TOPIC, is_key=True)
    rows = [
        bronze_row(value, TOPIC, 0),
        bronze_row(value, TOPIC, 1, key=key, headers=[("trace", b"x" * 5000), ("none", None)]),
        bronze_row(None, TOPIC, 2, key=b"plain-key"),
        bronze_row(b"\x00\x00\x00", "t" * 200, 3, headers=[("h" * 300, b"")]),
        bronze_row(value, TOPIC, 4, key=key, headers=[(f"h{i}", b"") for i in range(50)]),
    ]
    bronze = spark.createDataFrame(rows, BRONZE_DDL)
    heads = Heads.of_rows(head_counts(bronze))
    shipped = (
        heads.framed(bronze)
        .select(*DECODE_INPUT, record_bytes().alias("_bound"))
        .orderBy("offset")
        .toArrow()
    )
    bounds = shipped.column("_bound").to_pylist()
    records = shipped.drop_columns(["_bound"])
    sizes = [records.slice(i, 1).nbytes for i in range(records.num_rows)]
    assert all(size <= bound for size, bound in zip(sizes, bounds, strict=True)), (sizes, bounds)
    assert bounds[1] > 5000 and bounds[1] < 2 * sizes[1]  # an upper bound, not a wild one
    assert heads.largest_record == max(bounds)


def test_each_batch_sets_the_limit_its_largest_record_allows_on_its_query_s_session(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    """Small records: the byte limit off on the query's session; a batch with a record whose
    bytes times the record limit pass the launch's limit: that limit back. The job's session
    keeps its own, and the rows land either way."""
    v1 = versions["v1"]
    lake = str(tmp_path / "lake")
    main = spark.newSession()
    batch = SilverBatch(
        main,
        lake,
        "55555555-5555-5555-5555-555555555555",
        SchemaResolver(open_registry(registry.url)),
        driver_records=0,  # the Spark path: the one that ships records to the Python workers
    )
    launch = ArrowBatches.for_session(main)
    assert (batch.arrow_batches.max_records, batch.arrow_batches.max_bytes) == (
        launch.max_records,
        launch.max_bytes,
    )
    batch.arrow_batches = ArrowBatches(main, max_records=10, max_bytes=20_000)
    query_session = spark.newSession()
    big_header = [("trace", b"x" * 2_500)]  # 10 records of more than 2,500 bytes: > 20,000
    seen = []
    for batch_id, headers in enumerate([[], big_header, []]):
        bronze = f"{lake}/bronze/ut_arrow{batch_id}"
        frames = [producer.frame(make_order(v1, 10 * batch_id + i), TOPIC) for i in range(3)]
        write_bronze(
            spark, bronze, [bronze_row(f, TOPIC, i, headers=headers) for i, f in enumerate(frames)]
        )
        batch(query_session.read.format("delta").load(bronze), batch_id)
        seen.append(query_session.conf.get(MAX_BYTES))
    assert seen == [str(UNBOUNDED), "20000", str(UNBOUNDED)]
    assert main.conf.get(MAX_BYTES) == spark.conf.get(MAX_BYTES)
    silver = spark.read.format("delta").load(Layout(lake).silver_table(table_name_for(ORDER)))
    assert silver.count() == 9
