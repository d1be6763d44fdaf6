"""The Arrow byte limit of a silver batch (``pipelines.silver.arrow_batches``): the bound of a
record's bytes read with the frame heads, and the limit the batch sets on its query's
session by it, on real frames and a real query session."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F  # noqa: N812

from codec import SchemaResolver, open_registry
from codec.framing import KEY_SCHEMA_ID_HEADER
from lakehouse.bronze_columns import RECORD_COLUMNS
from lakehouse.layout import Layout
from pipelines.naming import table_name_for
from pipelines.silver import SilverBatch
from pipelines.silver.arrow_batches import MAX_BYTES, UNBOUNDED, ArrowBatches, record_bytes
from pipelines.silver.decode import DECODE_INPUT
from pipelines.silver.frame_heads import VALUE_HEAD, frame_heads, head_counts
from pipelines.silver.framing import VERSION, Heads
from pipelines.silver.record_framing import python_framed
from tests.support.silver_testkit import BRONZE_DDL, bronze_row, make_order, write_bronze

TOPIC = "ab.orders"
ORDER = "silvertest.v1.Order"


def spark_arrow_bytes(array: pa.Array) -> int:
    """The bytes Spark's Arrow writer counts for ``array`` (``getBufferSizeFor``): a validity
    bitmap always, offsets of variable-width and list values, their data."""
    n = len(array)
    validity = (n + 7) // 8
    kind = array.type
    if pa.types.is_struct(kind):
        return validity + sum(spark_arrow_bytes(child) for child in array.flatten())
    if pa.types.is_list(kind):
        return validity + 4 * (n + 1) + spark_arrow_bytes(array.flatten())
    if pa.types.is_binary(kind) or pa.types.is_string(kind):
        lengths = pc.binary_length(array).fill_null(0)
        return validity + 4 * (n + 1) + (pc.sum(lengths).as_py() or 0)
    if pa.types.is_boolean(kind):
        return 2 * validity
    return validity + n * kind.bit_width // 8


def shipped_bytes(df: Any) -> tuple[list[int], list[int]]:
    """Each row's Arrow bytes as a pass ships ``df`` (inside the struct ``mapInArrow`` wraps its
    input in: one more validity bit), and its ``_bound`` column."""
    table = df.orderBy("offset").toArrow()
    bounds = table.column("_bound").to_pylist()
    rows = table.drop_columns(["_bound"]).combine_chunks()
    sizes = [
        1 + sum(spark_arrow_bytes(column.chunk(0).slice(i, 1)) for column in rows.columns)
        for i in range(rows.num_rows)
    ]
    return sizes, bounds


def test_the_bound_holds_each_record_as_each_pass_ships_it(
    spark: Any, producer: Any, versions: Any
) -> None:
    """Each record's Arrow bytes are at most its ``record_bytes`` in every pass that ships
    records to the Python workers: the Python framing, the decode pass of one version and the
    one of several (framed keys included, a key framed by a GUID header the largest of those
    columns); the heads give the batch's largest bound."""
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 1), TOPIC)
    key = producer.frame(v1.Ping(id="k-1"), TOPIC, is_key=True)
    guid_header = (KEY_SCHEMA_ID_HEADER, b"\x01" + bytes(range(16)) + b"\x00")  # GUID, index 0
    rows = [
        bronze_row(value, TOPIC, 0),
        bronze_row(value, TOPIC, 1, key=key, headers=[("trace", b"x" * 5000), ("none", None)]),
        bronze_row(None, TOPIC, 2, key=b"plain-key"),
        bronze_row(b"\x00\x00\x00", "t" * 200, 3, headers=[("h" * 300, b"")]),
        bronze_row(value, TOPIC, 4, key=key, headers=[(f"h{i}", b"") for i in range(50)]),
        bronze_row(value, TOPIC, 5, key=b"\x00k", headers=[guid_header]),
    ]
    bronze = spark.createDataFrame(rows, BRONZE_DDL)
    heads = Heads.of_rows(head_counts(bronze))
    assert heads.python  # the GUID header's record is framed on the Python workers
    framed = heads.framed(bronze).unionByName(python_framed(bronze, heads))
    bound = record_bytes().alias("_bound")
    passes = {
        "Python framing": frame_heads(bronze).select(*RECORD_COLUMNS, VALUE_HEAD, bound),
        "decode": framed.select(*DECODE_INPUT, bound),
        "decode of versions": framed.select(*DECODE_INPUT, F.lit(0).alias(VERSION), bound),
    }
    for name, shipped in passes.items():
        sizes, bounds = shipped_bytes(shipped)
        assert all(s <= b for s, b in zip(sizes, bounds, strict=True)), (name, sizes, bounds)
    guid_key = framed.where("offset = 5").select("_key_schema_key.schema_guid").first()
    assert guid_key is not None and len(guid_key[0]) == 36
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
