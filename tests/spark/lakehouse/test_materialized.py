"""``lakehouse.materialized``: a frame computed once, read back from the kept rows as a leaf,
and freed (a real session)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from lakehouse.materialized import keeps_as_leaf, materialize, release
from tests.support.spark_cache import persistent_rdds


def test_the_frame_is_computed_once_and_read_back_from_its_kept_rows(spark: Any) -> None:
    runs = spark.sparkContext.accumulator(0)

    def counted(n):  # noqa: ANN001, ANN202 - no hints: pyspark reads them as an eval type
        runs.add(1)
        return n * 2

    doubled = F.udf(counted, "long")
    before = persistent_rdds(spark)
    kept = materialize(spark.range(0, 50, numPartitions=2).select(doubled("id").alias("twice")))
    assert runs.value == 50  # computed at once, before any query of it
    assert sorted(r.twice for r in kept.collect()) == [2 * i for i in range(50)]
    assert kept.where("twice >= 90").count() == 5
    assert runs.value == 50  # the queries read the kept rows: nothing recomputed
    plan = kept._jdf.queryExecution().logical()
    assert plan.getClass().getSimpleName() == "LogicalRDD"  # a leaf, not the frame's plan
    assert plan.children().size() == 0
    assert len(persistent_rdds(spark) - before) == 1

    release(kept)
    assert persistent_rdds(spark) - before == set()
    with pytest.raises(Exception, match="(?i)checkpoint block"):
        kept.count()  # freed: its rows are gone


def test_release_unpersists_a_persisted_frame(spark: Any) -> None:
    cached = spark.range(10).persist()
    assert cached.count() == 10
    assert cached.storageLevel.useMemory
    release(cached)
    assert not cached.storageLevel.useMemory
    assert cached.count() == 10  # a persisted frame is only uncached: it can still be read


def test_a_frame_kept_through_the_cache_keeps_its_plan_and_is_recomputable(spark: Any) -> None:
    before = persistent_rdds(spark)
    source = spark.range(0, 20, numPartitions=2).selectExpr("id * 3 AS thrice")
    kept = materialize(source, as_leaf=False)  # how it is kept on a cluster
    assert kept.is_cached
    assert kept._jdf.queryExecution().logical().children().size() > 0  # the plan, not a leaf
    assert kept.where("thrice % 2 = 0").count() == 10
    assert len(persistent_rdds(spark) - before) == 1
    release(kept)
    assert not kept.is_cached
    assert persistent_rdds(spark) - before == set()
    assert kept.count() == 20


@pytest.mark.parametrize(
    ("master", "as_leaf"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*, 3]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://host:6443", False),
    ],
)
def test_frames_are_kept_as_leaves_on_a_local_master_only(master: str, as_leaf: bool) -> None:
    assert keeps_as_leaf(master) is as_leaf


def test_the_local_test_session_keeps_frames_as_leaves(spark: Any) -> None:
    assert keeps_as_leaf(spark.sparkContext.master)
    kept = materialize(spark.range(3))
    assert not kept.is_cached
    assert kept._jdf.queryExecution().logical().getClass().getSimpleName() == "LogicalRDD"
    release(kept)


def test_releasing_a_frame_that_keeps_nothing_is_harmless(spark: Any) -> None:
    plain = spark.range(4)
    release(plain)
    assert plain.count() == 4
