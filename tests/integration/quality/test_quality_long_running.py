"""What a long-running silver stream needs of quality: no cached batches left behind, results
writes that survive concurrent streams, a summary computed in Spark."""

from __future__ import annotations

import re
import threading

import pytest

from lakehouse.layout import Layout
from quality.checker import QualityChecker
from quality.results import summarize
from quality.rules import parse_rules
from tests.support.quality_testkit import NOW, ORDER, TABLE, make_batch, order_row

pytestmark = pytest.mark.integration


def _cached(spark) -> tuple[int, bool]:
    """Persistent RDDs of the context, and whether Spark SQL's cache holds any plan."""
    jvm_session = spark._jsparkSession
    return (
        spark.sparkContext._jsc.getPersistentRDDs().size(),
        bool(jvm_session.sharedState().cacheManager().isEmpty()),
    )


def test_validated_batches_are_not_left_cached(spark, tmp_path):
    rules = [
        {  # a quarantine rule the predicates do not model: GE's row list (a second GE batch)
            "message_type": ORDER,
            "expectation": "expect_column_pair_values_a_to_be_greater_than_b",
            "kwargs": {"column_A": "amount", "column_B": "qty"},
            "policy": "quarantine",
        },
        {
            "message_type": ORDER,
            "expectation": "expect_column_values_to_not_be_null",
            "kwargs": {"column": "order_id"},
            "policy": "quarantine",
        },
    ]
    checker = QualityChecker(spark, str(tmp_path / "lakehouse"), parse_rules(rules))
    spark.catalog.clearCache()
    before = _cached(spark)  # Delta keeps its log states as persistent RDDs: not zero
    assert before[1], "Spark SQL's cache holds plans already"
    batches = []
    for batch_id in range(4):
        rows = [order_row(i) for i in range(8)]
        rows[batch_id] = order_row(batch_id, amount=0.5, order_id=None)
        batch = make_batch(spark, rows)
        outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=batch_id)
        assert outcome.failed.count() == 1 and outcome.passed.count() == 7
        batches.append(batch)
    assert _cached(spark) == before
    assert not any(b.is_cached for b in batches)


def _results(n: int, batch_id: int, table: str):
    from quality.results import QualityResult

    return [
        QualityResult(
            batch_id=batch_id,
            table=table,
            message_type=ORDER,
            expectation=f"expect_x(n={i})",
            expectation_type="expect_x",
            policy="warn",
            success=True,
            element_count=10,
            unexpected_count=0,
            observed_value=None,
            validated_at=NOW,
            rows_checked=10,
            rows_quarantined=0,
        )
        for i in range(n)
    ]


def test_concurrent_streams_write_results_without_conflicts(spark, tmp_path):
    """Processing-time silver runs one query per bronze table; their results commits race
    (the first ones to create the table, the others to replace their own rows)."""
    from quality.results import write_results

    lake = str(tmp_path / "lakehouse")
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def stream(source: str) -> None:
        try:
            start.wait()
            for batch_id in range(4):
                write_results(spark, lake, _results(3, batch_id, TABLE), batch_id, source)
                # a retried micro-batch writes the same rows again: still one copy
                write_results(spark, lake, _results(3, batch_id, TABLE), batch_id, source)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=stream, args=(s,)) for s in ("stream-a", "stream-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, [re.findall(r"\w+Exception", str(e))[:2] for e in errors]
    table = spark.read.format("delta").load(Layout(lake).quality_results)
    counts = {
        (r["source"], r["batch_id"]): r["count"]
        for r in table.groupBy("source", "batch_id").count().collect()
    }
    assert counts == {(s, b): 3 for s in ("stream-a", "stream-b") for b in range(4)}


def test_summarize_collects_only_the_summary(spark, tmp_path, monkeypatch):
    checker = QualityChecker(
        spark,
        str(tmp_path / "lakehouse"),
        parse_rules(
            [
                {
                    "message_type": ORDER,
                    "expectation": "expect_column_values_to_not_be_null",
                    "kwargs": {"column": "order_id"},
                    "policy": "quarantine",
                },
                {
                    "message_type": ORDER,
                    "expectation": "expect_column_values_to_not_be_null",
                    "kwargs": {"column": "email"},
                    "policy": "fail",
                },
            ]
        ),
    )
    bad = make_batch(spark, [order_row(i, order_id=None if i < 2 else "x") for i in range(6)])
    rejected = make_batch(spark, [order_row(i, email=None if i == 0 else "a@b") for i in range(4)])
    good = make_batch(spark, [order_row(i) for i in range(3)])
    empty = good.limit(0)
    for source, batch_id, batch in (
        ("s-a", 0, bad),
        ("s-a", 1, rejected),
        ("s-b", 0, good),
        ("s-c", 0, empty),
    ):
        outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=batch_id)
        checker.write_results(outcome.results, batch_id, source)
    lake = str(tmp_path / "lakehouse")
    checker.write_results(
        checker.validate(good, message_type=ORDER, table="other", batch_id=0).results, 0, "s-a"
    )

    collected: list[int] = []
    real_collect = type(good).collect

    def counting_collect(self):  # every collect() of a DataFrame in summarize
        rows = real_collect(self)
        collected.append(len(rows))
        return rows

    monkeypatch.setattr(type(good), "collect", counting_collect)
    summary = {s["table"]: s for s in summarize(spark, lake)}
    monkeypatch.undo()
    results_rows = spark.read.format("delta").load(Layout(lake).quality_results).count()
    # the driver gets one row per (table, failed expectation) and per table, not every result
    assert sum(collected) < results_rows and sum(collected) <= 4, collected
    assert summary[TABLE] == {
        "table": TABLE,
        "message_type": ORDER,
        "batches": 3,
        "checked": 13,
        "passed": 7,
        "quarantined": 2,
        "failed_batches": 1,
        "failed_by_expectation": {
            "expect_column_values_to_not_be_null(column=email)": {
                "policy": "fail",
                "failed_batches": 1,
                "unexpected_rows": 1,
            },
            "expect_column_values_to_not_be_null(column=order_id)": {
                "policy": "quarantine",
                "failed_batches": 1,
                "unexpected_rows": 2,
            },
        },
    }
    assert summary["other"]["batches"] == 1 and summary["other"]["failed_by_expectation"] == {}


def test_old_results_are_pruned_by_the_configured_retention(spark, tmp_path):
    from dataclasses import replace
    from datetime import timedelta

    from pipelines.quality_retention import prune_quality_results
    from pipelines.settings import parse_config
    from quality.results import write_results

    lake = str(tmp_path / "lakehouse")
    for batch_id, age in enumerate((40, 31, 29, 0)):
        rows = [replace(r, validated_at=NOW - timedelta(days=age)) for r in _results(2, 0, TABLE)]
        write_results(spark, lake, [replace(r, batch_id=batch_id) for r in rows], batch_id)
    cfg = parse_config(
        {
            "lakehouse": {"path": lake},
            "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["t"]},
            "quality": {"results_retention_days": 30},
        }
    )
    assert prune_quality_results(spark, cfg) == 4
    table = spark.read.format("delta").load(Layout(lake).quality_results)
    assert sorted({r["batch_id"] for r in table.collect()}) == [2, 3]
    assert prune_quality_results(spark, cfg) == 0


def test_maintain_of_the_quality_group_prunes_results_too(spark, tmp_path):
    """A stream that runs for months never restarts silver: `protolake maintain` prunes too."""
    from dataclasses import replace
    from datetime import timedelta

    from pipelines.ops.maintain import prune_results_of
    from pipelines.settings import parse_config
    from quality.results import write_results

    lake = str(tmp_path / "lakehouse")
    for batch_id, age in enumerate((45, 1)):
        rows = [replace(r, validated_at=NOW - timedelta(days=age)) for r in _results(2, 0, TABLE)]
        write_results(spark, lake, [replace(r, batch_id=batch_id) for r in rows], batch_id)

    def config(days: int):
        return parse_config(
            {
                "lakehouse": {"path": lake},
                "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["t"]},
                "quality": {"results_retention_days": days},
            }
        )

    cfg = config(30)
    assert prune_results_of(spark, cfg, "bronze", dry_run=False) is None
    assert prune_results_of(spark, cfg, "quality", dry_run=True) is None
    assert prune_results_of(spark, config(0), "all", dry_run=False) is None
    assert spark.read.format("delta").load(Layout(lake).quality_results).count() == 4
    assert prune_results_of(spark, cfg, "quality", dry_run=False) == 2
    table = spark.read.format("delta").load(Layout(lake).quality_results)
    assert sorted({r["batch_id"] for r in table.collect()}) == [1]
    assert prune_results_of(spark, cfg, "all", dry_run=False) == 0


def test_results_table_written_by_spark_without_source_takes_new_results(spark, tmp_path):
    """A results table from before the ``source`` column (written by Spark) gets the column,
    and later writes (delta-rs, in-process) replace their own rows and keep the old ones."""
    from pyspark.sql import functions as F  # noqa: N812

    from quality.results import RESULTS_SCHEMA, write_results

    lake = str(tmp_path / "lakehouse")
    path = Layout(lake).quality_results
    old_schema = type(RESULTS_SCHEMA)([f for f in RESULTS_SCHEMA.fields if f.name != "source"])
    old_rows = [r.as_row()[:-1] for r in _results(2, 0, "old_table")]
    spark.createDataFrame(old_rows, schema=old_schema).write.format("delta").save(path)

    write_results(spark, lake, _results(3, 1, TABLE), 1, "s")
    write_results(spark, lake, _results(3, 1, TABLE), 1, "s")  # a retry: still one copy
    table = spark.read.format("delta").load(path)
    assert "source" in table.columns
    counts = {
        (r["table"], r["source"]): r["count"]
        for r in table.groupBy("table", "source").count().collect()
    }
    assert counts == {("old_table", None): 2, (TABLE, "s"): 3}
    [validated_at] = {
        r[0] for r in table.where(F.col("table") == TABLE).select("validated_at").collect()
    }
    assert validated_at == NOW.replace(tzinfo=None)  # session time zone UTC: the same instant
