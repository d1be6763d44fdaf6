"""Unit tests of the pure parts of pipelines.ops and pipelines.metrics (no Spark, no Kafka)."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from pipelines import metrics
from pipelines.cli import build_parser
from pipelines.ops.audit import Gap, GapCheck, _read_partition_gaps
from pipelines.ops.common import parse_time, to_jsonable
from pipelines.ops.replay import filter_from_args
from pipelines.ops.replay_state import ReplayFilter, selection_id
from pipelines.settings import parse_config
from pipelines.settings.clients import kafka_client_conf, subscribed_topics


def _cfg(**options: str) -> Any:
    return parse_config(
        {"kafka": {"bootstrap_servers": "b:9092", "topics": ["t"], "options": dict(options)}}
    )


def test_kafka_client_conf_translates_jaas_and_drops_java_only_keys() -> None:
    cfg = _cfg(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u1" password="p\\"w";',
            "ssl.truststore.location": "/x.jks",
        }
    )
    conf = kafka_client_conf(cfg)
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u1",
        "sasl.password": 'p"w',
    }


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        ("a\\\\b", "a\\b"),  # written a\\b in the JAAS line: the JVM reads a\b
        ('p\\"w', 'p"w'),
        ("x\\ty", "x\ty"),
        ("\\101\\0z", "A\x00z"),  # octal escapes
        ("\\q", "q"),
    ],
)
def test_kafka_client_conf_unquotes_jaas_values_as_the_jvm_does(quoted: str, value: str) -> None:
    jaas = f'PlainLoginModule required username="u" password="{quoted}";'
    assert kafka_client_conf(_cfg(**{"sasl.jaas.config": jaas}))["sasl.password"] == value


def test_kafka_clients_read_at_bronzes_isolation_level() -> None:
    assert "isolation.level" not in kafka_client_conf(_cfg())  # librdkafka's: read_committed
    conf = kafka_client_conf(_cfg(**{"isolation.level": "read_uncommitted"}))
    assert conf["isolation.level"] == "read_uncommitted"


def test_subscribed_topics_are_the_list_or_whole_names_matching_the_pattern() -> None:
    existing = ["shop.orders", "shop.orders.dlq", "xshop.orders", "__consumer_offsets", "t"]
    assert subscribed_topics(_cfg(), existing) == {"t"}
    listed = parse_config({"kafka": {"bootstrap_servers": "b", "topics": ["a", "t"]}})
    assert subscribed_topics(listed, existing) == {"a", "t"}  # "a" does not exist yet
    pattern = parse_config({"kafka": {"bootstrap_servers": "b", "topic_pattern": r"shop\..*"}})
    assert subscribed_topics(pattern, existing) == {"shop.orders", "shop.orders.dlq"}
    everything = parse_config({"kafka": {"bootstrap_servers": "b", "topic_pattern": ".*"}})
    assert subscribed_topics(everything, existing) == set(existing) - {"__consumer_offsets"}


def test_parse_time_naive_is_utc_and_bad_text_is_an_error() -> None:
    assert parse_time("2026-01-02T03:04:05") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_time("2026-01-02T03:04:05Z").tzinfo is not None
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")


def test_to_jsonable() -> None:
    from decimal import Decimal

    doc = to_jsonable({"t": datetime(2026, 1, 1, tzinfo=UTC), "d": Decimal("3"), "b": b"\x01"})
    assert doc == {"t": "2026-01-01T00:00:00+00:00", "d": 3, "b": "01"}
    json.dumps(doc)


def test_selection_id_depends_on_the_records_and_the_silver_state_only() -> None:
    a = selection_id(6, 12345)
    assert a == selection_id(6, 12345)
    assert a != selection_id(6, 12346) and a != selection_id(7, 12345)
    state = [("/lh/silver/b", 3), ("/lh/silver/a", 7)]
    assert selection_id(6, 12345, state) == selection_id(6, 12345, list(reversed(state)))
    assert selection_id(6, 12345, state) != selection_id(6, 12345, [("/lh/silver/b", 4)])
    assert selection_id(6, 12345, state) != a
    app_id, batch_id = a
    assert app_id.startswith("replay-") and 0 <= batch_id < 2**63


def test_replay_arguments() -> None:
    parser = build_parser("replay")
    args = parser.parse_args(
        [
            "replay",
            "--config",
            "x.toml",
            "--reason",
            "unknown_schema",
            "--reason",
            "BAD_PAYLOAD",
            "--topic",
            "a",
            "--schema-id",
            "7",
            "--since",
            "2026-01-01",
            "--dry-run",
            "--json",
        ]
    )
    flt = filter_from_args(args)
    assert flt == ReplayFilter(
        reasons=("UNKNOWN_SCHEMA", "BAD_PAYLOAD"),
        topics=("a",),
        schema_ids=(7,),
        since=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert args.dry_run and args.json
    bad = argparse.Namespace(reason=[], topic=[], schema_id=[], since="soon", until=None)
    with pytest.raises(ValueError):
        filter_from_args(bad)


@pytest.mark.parametrize("command", ["replay", "status", "audit", "maintain", "sql"])
def test_every_command_registers(command: str) -> None:
    args = build_parser(command).parse_args([command, "--config", "c.toml"])
    assert callable(args.func) and args.config == "c.toml"


def test_maintain_refuses_short_retention_before_spark(tmp_path: Any, capsys: Any) -> None:
    from pipelines.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[kafka]\nbootstrap_servers = "b:1"\ntopics = ["t"]\n')
    assert main(["maintain", "--config", str(cfg), "--retention-hours", "24"]) == 2
    assert "--force-retention" in capsys.readouterr().err


def test_kafka_lag_from_progress_offsets() -> None:
    source = {
        "endOffset": json.dumps({"a": {"0": 10, "1": 5}}),
        "latestOffset": json.dumps({"a": {"0": 12, "1": 5}, "b": {"0": 3}}),
    }
    # a partition the batch did not cover yet (new topic) has no known start: counted as 0
    assert metrics.kafka_lag(source) == {"a": 2, "b": 0}
    delta = {"endOffset": json.dumps({"sourceVersion": 1, "reservoirVersion": 3, "index": -1})}
    assert metrics.kafka_lag(delta) is None


def test_record_progress_updates_metrics_and_joins_silver_figures() -> None:
    q = "silver_unit_test_q"
    metrics.silver_batch_hook(q)(
        SimpleNamespace(
            batch_id=4,
            records=9,
            silver={"t1": 7},
            quarantined={"BAD_MAGIC": 2},
            steps={"frame": 0.25, "write": 1.5},
        )
    )
    progress = {
        "name": q,
        "batchId": 4,
        "numInputRows": 9,
        "inputRowsPerSecond": 3.0,
        "processedRowsPerSecond": 4.5,
        "durationMs": {"triggerExecution": 2000, "addBatch": 1800, "latestOffset": 45},
        "timestamp": "2026-01-01T00:00:00.000Z",
        "sources": [{"metrics": {"numFilesOutstanding": "2"}, "endOffset": "{}"}],
    }
    record = metrics.record_progress(progress)
    assert record["records_in"] == 9 and record["duration_seconds"] == 2.0
    assert record["decoded"] == {"t1": 7} and record["quarantined"] == {"BAD_MAGIC": 2}
    assert record["files_outstanding"] == 2
    assert record["steps_seconds"] == {"frame": 0.25, "write": 1.5}
    assert record["phases_seconds"] == {
        "triggerExecution": 2.0,
        "addBatch": 1.8,
        "latestOffset": 0.045,
    }
    reg = metrics.REGISTRY
    assert reg.get_sample_value("protolake_batch_records_total", {"query": q}) == 9
    assert reg.get_sample_value("protolake_silver_decoded_total", {"query": q, "table": "t1"}) == 7
    assert (
        reg.get_sample_value(
            "protolake_silver_quarantined_total", {"query": q, "reason": "BAD_MAGIC"}
        )
        == 2
    )
    assert reg.get_sample_value("protolake_last_batch_timestamp_seconds", {"query": q}) == (
        datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    )
    # the silver figures are consumed once
    assert "decoded" not in metrics.record_progress(progress)


def test_a_silver_batch_read_twice_counts_its_records_once() -> None:
    q = "silver_unit_test_two_passes"
    metrics.silver_batch_hook(q)(
        SimpleNamespace(batch_id=1, records=10, silver={"t": 10}, quarantined={}, steps={})
    )
    progress = {
        "name": q,
        "batchId": 1,
        "numInputRows": 20,  # Spark counted the keys pass and the decode pass
        "inputRowsPerSecond": 8.0,
        "processedRowsPerSecond": 40.0,
        "durationMs": {"triggerExecution": 500},
    }
    record = metrics.record_progress(progress)
    assert record["records_in"] == 10
    assert (record["input_rows_per_second"], record["processed_rows_per_second"]) == (4.0, 20.0)
    reg = metrics.REGISTRY
    assert reg.get_sample_value("protolake_batch_records_total", {"query": q}) == 10
    assert reg.get_sample_value("protolake_processed_rows_per_second", {"query": q}) == 20.0


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset


class _Eof:
    def error(self) -> Any:
        return SimpleNamespace(code=lambda: "EOF")


class _FakeConsumer:
    """A partition whose readable offsets are given (what read_committed returns)."""

    def __init__(self, readable: list[int]) -> None:
        self.readable = sorted(readable)
        self.pos = 0
        self.assigns: list[int] = []

    def assign(self, tps: list[Any]) -> None:
        self.pos = tps[0]
        self.assigns.append(tps[0])

    def poll(self, timeout: float) -> Any:
        nxt = [o for o in self.readable if o >= self.pos]
        if not nxt:
            return _Eof()
        self.pos = nxt[0] + 1
        return _Msg(nxt[0])


def test_gap_walk_reports_only_readable_offsets() -> None:
    # bronze has 0-2, 7-9, 20-29, 9000; Kafka still serves 0-2, 5, 7-9, 20-29, 9000
    gaps = [Gap("t", 0, 3, 6), Gap("t", 0, 10, 19), Gap("t", 0, 30, 8999)]
    readable = [0, 1, 2, 5, 7, 8, 9, *range(20, 30), 9000]
    consumer = _FakeConsumer(readable)
    result = GapCheck()
    found = _read_partition_gaps(
        consumer,
        ("t", 0),
        gaps,
        1.0,
        result,
        SimpleNamespace(_PARTITION_EOF="EOF"),
        lambda t, p, o: o,
    )
    assert found == [5]
    assert not result.unverified


def test_gap_walk_seeks_instead_of_reading_far() -> None:
    gaps = [Gap("t", 0, 3, 3), Gap("t", 0, 100000, 100000)]
    consumer = _FakeConsumer([0, 1, 2, *range(4, 100000), 100001])
    found = _read_partition_gaps(
        consumer,
        ("t", 0),
        gaps,
        1.0,
        GapCheck(),
        SimpleNamespace(_PARTITION_EOF="EOF"),
        lambda t, p, o: o,
    )
    assert found == [] and consumer.assigns == [3, 100000]


@pytest.mark.parametrize(
    ("exception", "outcome", "error"),
    [(None, "ok", None), ("", "ok", None), ("boom\n\tat x.y", "failed", "boom")],
)
def test_terminated_event_logs_outcome_and_first_error_line(caplog, exception, outcome, error):
    listener = metrics.MetricsListener()
    event = SimpleNamespace(id="q-terminated-test", exception=exception)
    with caplog.at_level("INFO", logger="pipelines.metrics"):
        listener.onQueryTerminated(event)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "pipelines.metrics"]
    assert lines[-1] == {
        "event": "terminated",
        "query": "q-terminated-test",
        "outcome": outcome,
        "error": error,
    }


@pytest.mark.parametrize("sample", [0, 1, 20])
def test_an_audit_counts_every_unverifiable_gap_whatever_it_samples(sample: int) -> None:
    from rich.console import Console

    from pipelines.ops.audit import AuditReport, Gap, GapCheck, render
    from pipelines.quarantine import InvariantReport

    gaps = GapCheck(gaps=3, gap_offsets=3, unverified=[Gap("t", p, 5, 5) for p in range(3)])
    report = AuditReport(InvariantReport(bronze_records=4, silver_records=4), gaps, True)
    data = report.to_dict(sample) | {"holds": report.holds}
    assert data["kafka"]["unverified_count"] == 3
    assert len(data["kafka"]["unverified"]) == min(sample, 3)
    console = Console(record=True, width=120)
    render(console, data)
    shown = console.export_text()
    assert "audit FAILED" in shown
    assert re.search(r"gaps not verifiable against Kafka\s*│?\s*3\b", shown), shown
