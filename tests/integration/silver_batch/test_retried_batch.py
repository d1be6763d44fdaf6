"""A silver batch run again after a restart, whose routing changed since its first attempt
landed part of its commits (``pipelines.silver.retried``): every bronze record still ends in
exactly one place, silver or quarantine (``check_invariant``).

Each test runs batch 0 twice on its own lakehouse, as a streaming query and its restart do:
the first attempt fails part-way (a failure the test makes), the second is the batch the
restarted query replays (``Replays.planned_ms`` set, as ``replays_of`` sets it).
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest

from codec import SchemaResolver, open_registry
from codec.errors import UnknownSchema
from lakehouse.delta import Replays
from lakehouse.layout import Layout
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant
from pipelines.silver import SilverBatch
from pipelines.silver.driver_pass import DRIVER_RECORDS
from tests.support.silver_testkit import bronze_row, make_order, write_bronze

TOPIC = "ut.orders"
ORDER = "silvertest.v1.Order"


class LaggingResolver(SchemaResolver):
    """A registry follower that has not replicated some schema ids yet."""

    def __init__(self, url: str, *missing: int) -> None:
        super().__init__(open_registry(url))
        self.missing = set(missing)

    def resolve_id(self, schema_id: int) -> Any:
        if schema_id in self.missing:
            raise UnknownSchema(f"schema {schema_id} is not on this registry yet")
        return super().resolve_id(schema_id)


def _batch(spark: Any, lake: str, app: str, resolver: Any, **kw: Any) -> SilverBatch:
    return SilverBatch(spark, lake, app, resolver, **kw)


def _rerun(
    spark: Any, lake: str, app: str, resolver: Any, started_ms: int, bronze: Any, **kw: Any
) -> None:
    """Batch 0 again, as the restarted query runs it (:func:`_replay`)."""
    _batch(spark, lake, app, resolver, replays=_replay(started_ms), **kw)(bronze, 0)


def _replay(started_ms: int) -> Replays:
    """What ``replays_of`` answers for a restart: batch 0 was planned and not committed."""
    return Replays(fresh_from=1, planned_ms=started_ms)


def _fail(*_: Any, **__: Any) -> None:
    raise RuntimeError("the driver died during the batch's commits")


def _places(spark: Any, lake: str) -> tuple[dict[int, str], list[int]]:
    """Quarantine offsets -> reason code; the Order table's offsets."""
    q = spark.read.format("delta").load(Layout(lake).quarantine)
    reasons = {r[0]: r[1] for r in q.select("_kafka_offset", "reason_code").collect()}
    silver = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(ORDER)}")
    return reasons, sorted(r[0] for r in silver.select("_kafka_offset").collect())


def _holds(spark: Any, lake: str) -> None:
    report = check_invariant(spark, lake)
    assert report.holds, report


@pytest.mark.parametrize("driver_records", [DRIVER_RECORDS, 0], ids=["driver", "spark"])
def test_a_version_that_conflicts_on_the_retry_is_quarantined_once(
    spark: Any, tmp_path: Path, producer: Any, versions: Any, registry: Any, driver_records: int
) -> None:
    """Query B creates the Order table with v1 while query A's batch, planned before B's table
    existed, appends the incompatible version: A's silver append fails, its quarantine commit
    lands. A's retry now sees the conflict: the conflicting records are owed to the quarantine,
    which has the batch already."""
    v1, vc = versions["v1"], versions["conflict"]
    lake = str(tmp_path / "lake")
    b_rows = [bronze_row(producer.frame(make_order(v1, i), TOPIC), TOPIC, i) for i in range(3)]
    a_rows = [
        bronze_row(producer.frame(make_order(vc, 200 + i, conflict=True), TOPIC), TOPIC, 10 + i)
        for i in range(2)
    ]
    a_rows.append(bronze_row(b"{not a frame}", TOPIC, 20))
    write_bronze(spark, f"{lake}/bronze/a", a_rows)
    write_bronze(spark, f"{lake}/bronze/b", b_rows)
    bronze_a = spark.read.format("delta").load(f"{lake}/bronze/a")
    app_a, app_b = "aaaaaaaa-0000-0000-0000-000000000001", "bbbbbbbb-0000-0000-0000-000000000002"
    kw = {"driver_records": driver_records}
    started = int(time.time() * 1000)
    first = _batch(spark, lake, app_a, SchemaResolver(open_registry(registry.url)), **kw)
    # the race made certain: A plans as though the Order table were not there yet
    first._known_schema = lambda path: None  # type: ignore[method-assign]
    _batch(spark, lake, app_b, SchemaResolver(open_registry(registry.url)), **kw)(
        spark.read.format("delta").load(f"{lake}/bronze/b"), 0
    )
    with pytest.raises(Exception, match="(?i)merge|schema|type"):
        first(bronze_a, 0)
    reasons, silver = _places(spark, lake)
    assert reasons == {20: "BAD_MAGIC"} and silver == [0, 1, 2]  # the partial first attempt

    _rerun(spark, lake, app_a, SchemaResolver(open_registry(registry.url)), started, bronze_a, **kw)
    reasons, silver = _places(spark, lake)
    assert reasons == {10: "SCHEMA_CONFLICT", 11: "SCHEMA_CONFLICT", 20: "BAD_MAGIC"}
    assert silver == [0, 1, 2]
    _holds(spark, lake)

    # the retry's own replay adds nothing
    _rerun(spark, lake, app_a, SchemaResolver(open_registry(registry.url)), started, bronze_a, **kw)
    assert _places(spark, lake) == (reasons, silver)
    _holds(spark, lake)


def test_a_schema_that_resolves_on_the_retry_stays_quarantined(
    spark: Any, tmp_path: Path, producer: Any, versions: Any, registry: Any
) -> None:
    """The first attempt cannot resolve v2's id (UNKNOWN_SCHEMA), commits the quarantine, and
    dies before the silver append. On the retry the id resolves: the v2 records stay where the
    first attempt landed them (the quarantine, from which ``protolake replay`` takes them),
    not in silver too."""
    v1, v2 = versions["v1"], versions["v2"]
    lake = str(tmp_path / "lake")
    rows = [bronze_row(producer.frame(make_order(v1, i), TOPIC), TOPIC, i) for i in range(3)]
    v2_frames = [producer.frame(make_order(v2, 10 + i, with_v2=True), TOPIC) for i in range(2)]
    rows += [bronze_row(f, TOPIC, 10 + i) for i, f in enumerate(v2_frames)]
    write_bronze(spark, f"{lake}/bronze/a", rows)
    bronze = spark.read.format("delta").load(f"{lake}/bronze/a")
    v2_id = struct.unpack(">I", v2_frames[0][1:5])[0]
    app = "cccccccc-0000-0000-0000-000000000003"
    started = int(time.time() * 1000)
    first = _batch(spark, lake, app, LaggingResolver(registry.url, v2_id))
    first.writes._table = _fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="driver died"):
        first(bronze, 0)
    reasons = _places_quarantine(spark, lake)
    assert reasons == {10: "UNKNOWN_SCHEMA", 11: "UNKNOWN_SCHEMA"}

    _rerun(spark, lake, app, SchemaResolver(open_registry(registry.url)), started, bronze)
    reasons, silver = _places(spark, lake)
    assert reasons == {10: "UNKNOWN_SCHEMA", 11: "UNKNOWN_SCHEMA"}
    assert silver == [0, 1, 2]
    _holds(spark, lake)


def test_records_a_landed_table_holds_are_not_quarantined_by_the_retry(
    spark: Any, tmp_path: Path, producer: Any, versions: Any, registry: Any
) -> None:
    """The other way round: the first attempt lands the silver table and dies before the
    quarantine commit; the retry cannot resolve v2's id any more. The v2 records stay in
    silver, and only the batch's bad frame goes to the quarantine."""
    v1, v2 = versions["v1"], versions["v2"]
    lake = str(tmp_path / "lake")
    rows = [bronze_row(producer.frame(make_order(v1, i), TOPIC), TOPIC, i) for i in range(2)]
    v2_frames = [producer.frame(make_order(v2, 10 + i, with_v2=True), TOPIC) for i in range(2)]
    rows += [bronze_row(f, TOPIC, 10 + i) for i, f in enumerate(v2_frames)]
    rows.append(bronze_row(b"{not a frame}", TOPIC, 20))
    write_bronze(spark, f"{lake}/bronze/a", rows)
    bronze = spark.read.format("delta").load(f"{lake}/bronze/a")
    v2_id = struct.unpack(">I", v2_frames[0][1:5])[0]
    app = "dddddddd-0000-0000-0000-000000000004"
    started = int(time.time() * 1000)
    first = _batch(spark, lake, app, SchemaResolver(open_registry(registry.url)))
    first.writes._quarantine_collected = _fail  # type: ignore[method-assign]
    first.writes._quarantine_by_spark = _fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="driver died"):
        first(bronze, 0)

    _rerun(spark, lake, app, LaggingResolver(registry.url, v2_id), started, bronze)
    reasons, silver = _places(spark, lake)
    assert reasons == {20: "BAD_MAGIC"}
    assert silver == [0, 1, 10, 11]
    _holds(spark, lake)


def _places_quarantine(spark: Any, lake: str) -> dict[int, str]:
    q = spark.read.format("delta").load(Layout(lake).quarantine)
    return {r[0]: r[1] for r in q.select("_kafka_offset", "reason_code").collect()}


def _orders_and_a_bad_frame(
    spark: Any, lake: str, producer: Any, versions: Any
) -> tuple[Any, int, int]:
    """Bronze rows: v1 Orders at offsets 0-1, v2 Orders at 10-11, a bad frame at 20; the
    bronze frame and the v1 and v2 schema ids."""
    v1, v2 = versions["v1"], versions["v2"]
    v1_frames = [producer.frame(make_order(v1, i), TOPIC) for i in range(2)]
    v2_frames = [producer.frame(make_order(v2, 10 + i, with_v2=True), TOPIC) for i in range(2)]
    rows = [bronze_row(f, TOPIC, i) for i, f in enumerate(v1_frames)]
    rows += [bronze_row(f, TOPIC, 10 + i) for i, f in enumerate(v2_frames)]
    rows.append(bronze_row(b"{not a frame}", TOPIC, 20))
    write_bronze(spark, f"{lake}/bronze/a", rows)
    bronze = spark.read.format("delta").load(f"{lake}/bronze/a")
    ids = [struct.unpack(">I", f[0][1:5])[0] for f in (v1_frames, v2_frames)]
    return bronze, ids[0], ids[1]


@pytest.mark.parametrize("driver_records", [DRIVER_RECORDS, 0], ids=["driver", "spark"])
def test_records_owed_to_a_landed_table_are_appended_to_it(
    spark: Any, tmp_path: Path, producer: Any, versions: Any, registry: Any, driver_records: int
) -> None:
    """The first attempt cannot resolve v2 (UNKNOWN_SCHEMA), lands the Order table with v1 and
    dies before the quarantine commit. On the retry v2 resolves: the landed table is owed the
    v2 records (their new columns merged), and the quarantine gets only the bad frame."""
    lake = str(tmp_path / "lake")
    bronze, _, v2_id = _orders_and_a_bad_frame(spark, lake, producer, versions)
    app = "ffffffff-0000-0000-0000-000000000006"
    kw = {"driver_records": driver_records}
    started = int(time.time() * 1000)
    first = _batch(spark, lake, app, LaggingResolver(registry.url, v2_id), **kw)
    first.writes._quarantine_collected = _fail  # type: ignore[method-assign]
    first.writes._quarantine_by_spark = _fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="driver died"):
        first(bronze, 0)

    _rerun(spark, lake, app, SchemaResolver(open_registry(registry.url)), started, bronze, **kw)
    reasons, silver = _places(spark, lake)
    assert reasons == {20: "BAD_MAGIC"}
    assert silver == [0, 1, 10, 11]
    _holds(spark, lake)


def test_a_third_attempt_gives_a_landed_quarantine_what_it_is_owed_again(
    spark: Any, tmp_path: Path, producer: Any, versions: Any, registry: Any
) -> None:
    """The quarantine lands on the first attempt (the bad frame) and silver fails every time
    until the third; each retry can resolve fewer ids, so each owes the quarantine more rows
    than the last: every owed commit lands, none is skipped as already there."""
    lake = str(tmp_path / "lake")
    bronze, v1_id, v2_id = _orders_and_a_bad_frame(spark, lake, producer, versions)
    app = "99999999-0000-0000-0000-000000000007"
    started = int(time.time() * 1000)
    attempts = [
        (SchemaResolver(open_registry(registry.url)), True),
        (LaggingResolver(registry.url, v2_id), True),
        (LaggingResolver(registry.url, v1_id, v2_id), False),
    ]
    for n, (resolver, fails) in enumerate(attempts):
        batch = _batch(
            spark, lake, app, resolver, replays=_replay(started) if n else Replays(fresh_from=0)
        )
        if fails:
            batch.writes._table = _fail  # type: ignore[method-assign]
            with pytest.raises(RuntimeError, match="driver died"):
                batch(bronze, 0)
        else:
            batch(bronze, 0)
    assert _places_quarantine(spark, lake) == {
        0: "UNKNOWN_SCHEMA",
        1: "UNKNOWN_SCHEMA",
        10: "UNKNOWN_SCHEMA",
        11: "UNKNOWN_SCHEMA",
        20: "BAD_MAGIC",
    }
    _holds(spark, lake)
