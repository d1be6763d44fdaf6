"""Quality checks inside the silver micro-batch: quarantine policy and fail policy."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from codec import SchemaResolver, open_registry
from lakehouse.layout import Layout
from lakehouse.tables import list_delta_tables
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant
from pipelines.silver import SilverBatch
from pipelines.silver.driver_pass import DRIVER_RECORDS
from tests.support.silver_testkit import bronze_row, write_bronze
from tests.support.spark_cache import persistent_rdds

TOPIC = "ut.pings"
PING = "silvertest.v1.Ping"


def _batch(
    spark: Any, lake: str, registry: Any, rules: list[dict[str, Any]], **options: Any
) -> SilverBatch:
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    parsed = parse_rules(rules)
    return SilverBatch(
        spark,
        lake,
        "77777777-7777-7777-7777-777777777777",
        SchemaResolver(open_registry(registry.url)),
        checker=QualityChecker(spark, lake, parsed),
        **options,
    )


@pytest.fixture(scope="module")
def pings(producer: Any, versions: Any) -> list[tuple[Any, ...]]:
    v1 = versions["v1"]
    ids = ["good-1", "bad-2", "good-3", "bad-4"]
    return [bronze_row(producer.frame(v1.Ping(id=i), TOPIC), TOPIC, n) for n, i in enumerate(ids)]


def test_quarantine_policy_moves_failing_rows(
    spark: Any, tmp_path: Any, registry: Any, pings: Any
) -> None:
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_pings"
    write_bronze(spark, bronze, pings)
    rule = {
        "message_type": PING,
        "expectation": "expect_column_values_to_match_regex",
        "kwargs": {"column": "id", "regex": "^good-"},
        "policy": "quarantine",
    }
    _batch(spark, lake, registry, [rule])(spark.read.format("delta").load(bronze), 0)
    kept = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(PING)}")
    assert sorted(r["id"] for r in kept.collect()) == ["good-1", "good-3"]
    q = spark.read.format("delta").load(Layout(lake).quarantine).collect()
    assert sorted(r["_kafka_offset"] for r in q) == [1, 3]
    assert {(r["reason_code"], r["stage"], r["_message_type"]) for r in q} == {
        ("DQ_FAILED", "quality", PING)
    }
    assert all("expect_column_values_to_match_regex" in r["reason"] for r in q)
    assert all(r["value"] == bytearray(pings[r["_kafka_offset"]][1]) for r in q)
    assert check_invariant(spark, lake).holds


def test_fail_policy_commits_nothing(spark: Any, tmp_path: Any, registry: Any, pings: Any) -> None:
    from quality.checker import QualityFailed

    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_pings"
    write_bronze(spark, bronze, pings)
    rule = {
        "message_type": PING,
        "expectation": "expect_column_values_to_match_regex",
        "kwargs": {"column": "id", "regex": "^good-"},
        "policy": "fail",
    }
    with pytest.raises(QualityFailed):
        _batch(spark, lake, registry, [rule])(spark.read.format("delta").load(bronze), 0)
    assert list_delta_tables(f"{lake}/silver", spark) == []
    assert list_delta_tables(f"{lake}/quarantine", spark) == []


# -- the same decision on every attempt of a batch ------------------------------------------

INGESTED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _frozen_clock(at: dt.datetime) -> type[dt.datetime]:
    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Clock:  # type: ignore[override]
            return at if tz is None else at.astimezone(tz)  # type: ignore[return-value]

    return Clock


@pytest.fixture(scope="module")
def early_ping(producer: Any, versions: Any) -> list[tuple[Any, ...]]:
    """Three pings, and one (offset 3) whose Kafka timestamp is two days after bronze had it."""
    v1 = versions["v1"]
    rows = [bronze_row(producer.frame(v1.Ping(id=f"p-{n}"), TOPIC), TOPIC, n) for n in range(4)]
    future = list(rows[3])
    future[5] = INGESTED + dt.timedelta(days=2)  # timestamp
    rows[3] = tuple(future)
    return rows


KEEP_ALL = {
    "message_type": PING,
    "expectation": "expect_column_values_to_not_be_null",
    "kwargs": {"column": "id"},
    "policy": "warn",
}


def test_a_batch_splits_the_same_whatever_the_wall_clock(
    spark: Any, tmp_path: Any, registry: Any, early_ping: Any, monkeypatch: Any
) -> None:
    import quality.checker

    quarantined = {}
    for days in (0, 5):  # the same batch, validated now and five days later
        monkeypatch.setattr(
            quality.checker, "datetime", _frozen_clock(INGESTED + dt.timedelta(days=days))
        )
        lake = str(tmp_path / f"lake{days}")
        write_bronze(spark, f"{lake}/bronze/ut_pings", early_ping)
        bronze = spark.read.format("delta").load(f"{lake}/bronze/ut_pings")
        _batch(spark, lake, registry, [KEEP_ALL])(bronze, 0)
        q = spark.read.format("delta").load(Layout(lake).quarantine).collect()
        quarantined[days] = sorted((r["_kafka_offset"], r["reason_code"]) for r in q)
    assert quarantined[0] == quarantined[5] == [(3, "DQ_FAILED")]


def test_a_retried_batch_loses_nothing_when_the_clock_moved(
    spark: Any, tmp_path: Any, registry: Any, early_ping: Any, monkeypatch: Any
) -> None:
    """Attempt 1 quarantines offset 3, appends silver, dies before the quarantine append;
    attempt 2 (same batch id and app id, days later) must not let it pass into the silver
    append that Delta skips."""
    import quality.checker
    from pipelines.silver import writes as silver_writes

    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_pings", early_ping)
    bronze = spark.read.format("delta").load(f"{lake}/bronze/ut_pings")
    # the quarantine's append, by Spark or by delta-rs (the path: their second or third argument)
    appends = {"append_idempotent": 1, "append_arrow": 2}

    def crash_on_quarantine(name: str, path_at: int) -> Any:
        append = getattr(silver_writes, name)

        def crashing(*args: Any, **kwargs: Any) -> Any:
            if args[path_at] == Layout(lake).quarantine:
                raise RuntimeError("killed before the quarantine append")
            return append(*args, **kwargs)

        return crashing

    monkeypatch.setattr(quality.checker, "datetime", _frozen_clock(INGESTED))
    for name, path_at in appends.items():
        monkeypatch.setattr(silver_writes, name, crash_on_quarantine(name, path_at))
    with pytest.raises(RuntimeError, match="killed"):
        _batch(spark, lake, registry, [KEEP_ALL])(bronze, 0)
    silver = f"{lake}/silver/{table_name_for(PING)}"
    kept = spark.read.format("delta").load(silver).collect()
    assert sorted(r["_kafka_offset"] for r in kept) == [0, 1, 2]

    monkeypatch.undo()
    monkeypatch.setattr(quality.checker, "datetime", _frozen_clock(INGESTED + dt.timedelta(days=5)))
    _batch(spark, lake, registry, [KEEP_ALL])(bronze, 0)  # the retry: same batch, same app id
    q = spark.read.format("delta").load(Layout(lake).quarantine).collect()
    assert [(r["_kafka_offset"], r["reason_code"]) for r in q] == [(3, "DQ_FAILED")]
    report = check_invariant(spark, lake)
    assert report.holds, report.summary()
    assert report.bronze_records == 4 and report.silver_records == 3


# -- the default suite on every table, configured expectations or not ------------------------

ORDER = "silvertest.v1.Order"


@pytest.fixture(scope="module")
def two_types(producer: Any, versions: Any) -> list[tuple[Any, ...]]:
    """Two orders and three pings; the last ping's Kafka timestamp is two days after bronze
    had it (the default timestamp bound quarantines it)."""
    from tests.support.silver_testkit import make_order

    v1 = versions["v1"]
    frames = [producer.frame(make_order(v1, i), TOPIC) for i in range(2)]
    frames += [producer.frame(v1.Ping(id=f"p-{i}"), TOPIC) for i in range(3)]
    rows = [bronze_row(frame, TOPIC, n) for n, frame in enumerate(frames)]
    future = list(rows[4])
    future[5] = future[8] + dt.timedelta(days=2)  # timestamp = _ingested_at + 2 days
    rows[4] = tuple(future)
    return rows


@pytest.mark.parametrize("configured", [[], [KEEP_ALL]], ids=["no-rules", "rules-for-pings"])
def test_every_table_gets_the_default_suite(
    spark: Any, tmp_path: Any, registry: Any, two_types: Any, configured: Any
) -> None:
    from pipelines.settings import parse_config
    from pipelines.silver.job import make_checker
    from quality.rules import default_rules

    lake = str(tmp_path / "lake")
    cfg = parse_config(
        {
            "lakehouse": {"path": lake},
            "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": [TOPIC]},
            "quality": {"expectations": configured},
        }
    )
    checker = make_checker(spark, cfg)
    assert checker is not None
    write_bronze(spark, f"{lake}/bronze/ut_pings", two_types)
    batch = SilverBatch(
        spark,
        lake,
        "88888888-8888-8888-8888-888888888888",
        SchemaResolver(open_registry(registry.url)),
        checker=checker,
    )
    before = persistent_rdds(spark)
    batch(spark.read.format("delta").load(f"{lake}/bronze/ut_pings"), 0)
    assert persistent_rdds(spark) <= before  # every frame the batch kept is freed

    results = spark.read.format("delta").load(f"{lake}/quality/results")
    found: dict[str, set[str]] = {}
    for r in results.select("table", "expectation").collect():
        found.setdefault(r["table"], set()).add(r["expectation"])
    configured_ids = {
        f"expect_column_values_to_not_be_null(column={r['kwargs']['column']})" for r in configured
    }
    assert found == {
        table_name_for(ORDER): {r.expectation_id for r in default_rules(ORDER)},
        table_name_for(PING): {r.expectation_id for r in default_rules(PING)} | configured_ids,
    }
    q = spark.read.format("delta").load(Layout(lake).quarantine).collect()
    assert [(r["_kafka_offset"], r["reason_code"]) for r in q] == [(4, "DQ_FAILED")]
    assert "_kafka_timestamp" in q[0]["reason"]
    assert check_invariant(spark, lake).holds


def test_a_fail_policy_on_one_of_two_tables_commits_nothing_and_frees_the_batch(
    spark: Any, tmp_path: Any, registry: Any, two_types: Any
) -> None:
    from quality.checker import QualityFailed

    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_pings", two_types)
    rules = [
        {  # the orders pass theirs; the pings' is failed by every ping
            "message_type": ORDER,
            "expectation": "expect_column_values_to_not_be_null",
            "kwargs": {"column": "order_id"},
            "policy": "fail",
        },
        {
            "message_type": PING,
            "expectation": "expect_column_values_to_match_regex",
            "kwargs": {"column": "id", "regex": "^good-"},
            "policy": "fail",
        },
    ]
    before = persistent_rdds(spark)
    with pytest.raises(QualityFailed, match="match_regex"):
        batch = _batch(spark, lake, registry, rules)
        batch(spark.read.format("delta").load(f"{lake}/bronze/ut_pings"), 0)
    assert persistent_rdds(spark) <= before
    assert list_delta_tables(f"{lake}/silver", spark) == []
    assert list_delta_tables(f"{lake}/quarantine", spark) == []


def _rule(expectation: str, policy: str, **kwargs: Any) -> dict[str, Any]:
    return {"message_type": PING, "expectation": expectation, "kwargs": kwargs, "policy": policy}


_IN_ARROW = [  # every rule one validate_arrow evaluates
    _rule("expect_column_values_to_match_regex", "quarantine", column="id", regex="^good-"),
    _rule("expect_column_value_lengths_to_be_between", "warn", column="id", min_value=6),
]
# a word boundary: Java's and Python's differ, so the table is checked as a local relation
_BY_SPARK = [
    *_IN_ARROW,
    _rule("expect_column_values_to_match_regex", "warn", column="id", regex=r"\bgood"),
]


def _count_calls(checker: Any, method: str) -> list[str]:
    """The message types ``checker.<method>`` is called with, as it runs (a list to read)."""
    calls: list[str] = []
    real = getattr(checker, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["message_type"])
        return real(*args, **kwargs)

    setattr(checker, method, counted)
    return calls


def _landed(spark: Any, lake: str) -> tuple[Any, ...]:
    """What a checked batch landed: silver rows, quarantine rows, quality results."""
    silver = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(PING)}")
    quarantine = spark.read.format("delta").load(Layout(lake).quarantine)
    results = spark.read.format("delta").load(Layout(lake).quality_results)
    return (
        sorted(tuple(r) for r in silver.drop("_processed_at").collect()),
        sorted(tuple(r) for r in quarantine.drop("_quarantined_at").collect()),
        sorted(tuple(r) for r in results.drop("validated_at").collect()),
    )


@pytest.mark.parametrize(
    "rules", [_IN_ARROW, _BY_SPARK], ids=["checked-in-arrow", "local-relation"]
)
def test_a_checked_batch_lands_the_same_on_either_path(
    spark: Any, tmp_path: Any, registry: Any, pings: Any, rules: list[dict[str, Any]]
) -> None:
    """The driver path (its checks in Arrow, or on a local relation when a rule is not
    evaluated in Arrow) lands the rows, the quarantine (DQ_FAILED with its reasons) and the
    quality results the Spark path lands."""
    landed = []
    for driver_records in (0, DRIVER_RECORDS):
        lake = str(tmp_path / f"lake-{driver_records}")
        bronze = f"{lake}/bronze/ut_pings"
        write_bronze(spark, bronze, pings)
        batch = _batch(spark, lake, registry, rules, driver_records=driver_records)
        by_spark = _count_calls(batch.checker, "validate")
        batch(spark.read.format("delta").load(bronze), 0)
        assert batch.history[0].quarantined == {"DQ_FAILED": 2}
        landed.append(_landed(spark, lake))
        in_arrow = driver_records and rules is _IN_ARROW
        assert by_spark == ([] if in_arrow else [PING])
    assert landed[0] == landed[1]
    from quality.rules import default_rules

    assert len(landed[0][2]) == len(rules) + len(default_rules(PING))
