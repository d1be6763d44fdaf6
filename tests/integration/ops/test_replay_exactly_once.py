"""protolake replay is exactly-once even when the selection changes between two runs.

Records framed with a schema id the registry does not have reach bronze and silver from the
real broker (UNKNOWN_SCHEMA in quarantine); the schema is registered; a replay dies after
appending them to silver and before marking them in quarantine; meanwhile one more matching
record is quarantined, so the next replay selects one record more (a different write id). The
re-run must mark the first records without appending them again: each record once in silver,
bronze = silver + quarantine.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from registry_server import start_registry_server

from lakehouse.layout import Layout
from pipelines.naming import table_name_for
from pipelines.ops import replay as replay_mod
from pipelines.ops import replay_state
from pipelines.quarantine import check_invariant
from tests.support.ops_itkit import (
    LATE_RECORDS,
    LATE_SCHEMA,
    LATE_TYPE,
    _produce_late,
    framed,
    ping_payload,
)
from tests.support.stack import BOOTSTRAP, check_kafka

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def _ingest(spark: Any, cfg: Any) -> None:
    from pipelines import bronze, silver

    bronze.run(cfg, spark=spark)
    silver.run(cfg, spark=spark)


def _produce_one(topic: str, schema_id: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    p.produce(topic, key=b"k-new", value=framed(schema_id, ping_payload("p-new", 7)))
    assert p.flush(30) == 0


def test_replay_after_a_crash_before_marking_writes_nothing_twice(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.settings import parse_config

    check_kafka(BOOTSTRAP)
    registry = start_registry_server(port=0)
    try:
        topic = f"it.ops.{uuid.uuid4().hex[:8]}.again"
        late_id = registry.store.next_id  # nothing else registers in this registry
        _produce_late(topic, late_id)
        lake = tmp_path / "lakehouse"
        cfg = parse_config(
            {
                "lakehouse": {"path": str(lake)},
                "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": [topic]},
                "registry": {"url": registry.url, "max_retries": 1, "timeout_seconds": 5.0},
                "catalog": {
                    "bronze_database": "",
                    "silver_database": "",
                    "quarantine_database": "",
                    "quality_database": "",
                },
            }
        )
        _ingest(spark, cfg)
        assert registry.register(f"{topic}-value", LATE_SCHEMA) == late_id
        flt = replay_state.ReplayFilter(reasons=("UNKNOWN_SCHEMA",), topics=(topic,))

        # 1. the replay dies after the silver append, before the quarantine MERGE
        def killed(*_args: Any, **_kwargs: Any) -> None:
            raise RuntimeError("killed before marking")

        monkeypatch.setattr(replay_mod, "mark_outcomes", killed)
        with pytest.raises(RuntimeError, match="killed"):
            replay_mod.replay(spark, cfg, flt, show_progress=False)
        monkeypatch.undo()
        silver_path = f"{lake}/silver/{table_name_for(LATE_TYPE)}"
        assert spark.read.format("delta").load(silver_path).count() == LATE_RECORDS
        q = spark.read.format("delta").load(Layout(str(lake)).quarantine)
        assert q.filter(F.col("replay_outcome").isNotNull()).count() == 0

        # 2. meanwhile one more matching record is quarantined (its schema id is unknown)
        _produce_one(topic, late_id + 1000)
        _ingest(spark, cfg)

        # 3. the re-run selects one record more, marks the first ones, writes none twice
        report = replay_mod.replay(spark, cfg, flt, show_progress=False)
        silver = spark.read.format("delta").load(silver_path)
        offsets = [r["_kafka_offset"] for r in silver.collect()]
        assert sorted(offsets) == list(range(LATE_RECORDS))  # each record exactly once
        invariant = check_invariant(spark, str(lake))
        assert invariant.holds, invariant.summary()
        assert report.selected == LATE_RECORDS + 1
        assert report.already_in_silver == LATE_RECORDS
        assert report.replayed == LATE_RECORDS
        assert report.still_failing == {"UNKNOWN_SCHEMA": 1}
        outcomes = sorted(
            (r["_kafka_offset"], r["replay_outcome"])
            for r in spark.read.format("delta").load(Layout(str(lake)).quarantine).collect()
        )
        assert outcomes == [(o, "replayed") for o in range(LATE_RECORDS)] + [
            (LATE_RECORDS, "UNKNOWN_SCHEMA")
        ]
        assert invariant.bronze_records == LATE_RECORDS + 1
        assert invariant.silver_records == LATE_RECORDS and invariant.quarantined_records == 1
    finally:
        registry.stop()
