"""Helpers of the silver integration tests: configuration for a test's lakehouse, a registry
test server that can be stopped and restarted on its port, unique topic prefixes, and the
records per Kafka partition in Kafka and in bronze, and the rows per message type in silver."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from registry_server import start_registry_server

from tests.support.stack import BOOTSTRAP, free_port

ROOT = Path(__file__).resolve().parents[2]


def kafka_partition_counts(topics: list[str]) -> dict[tuple[str, int], int]:
    """Records each partition of ``topics`` holds (high minus low watermark, read committed);
    partitions without any are left out, as bronze has no rows for them."""
    from confluent_kafka import Consumer

    from pipelines.settings.clients import partition_watermarks

    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": "it-probe",
            "isolation.level": "read_committed",
        }
    )
    try:
        marks = partition_watermarks(consumer, consumer.list_topics(timeout=10), topics)
    finally:
        consumer.close()
    return {tp: high - low for tp, (low, high) in marks.items() if high > low}


def bronze_partition_counts(spark: Any, lake: str) -> dict[tuple[str, int], int]:
    """Records each Kafka partition has in the bronze tables of ``lake``."""
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables

    out: dict[tuple[str, int], int] = {}
    for path in list_delta_tables(Layout(lake).bronze, spark):
        for r in (
            spark.read.format("delta").load(path).groupBy("topic", "partition").count().collect()
        ):
            out[(r["topic"], int(r["partition"]))] = int(r["count"])
    return out


def silver_counts(spark: Any, lake: str) -> dict[str, int]:
    """Rows per message type in the silver tables of ``lake`` (a type may span tables)."""
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables

    out: dict[str, int] = {}
    for path in list_delta_tables(Layout(lake).silver, spark):
        for r in spark.read.format("delta").load(path).groupBy("_message_type").count().collect():
            out[r["_message_type"]] = out.get(r["_message_type"], 0) + int(r["count"])
    return out


class Registry:
    """A registry test server on a fixed port that can be stopped and started again
    (its schemas persist in a JSON file across restarts)."""

    def __init__(self, data: Path) -> None:
        self.port = free_port()
        self.data = str(data)
        self.handle: Any = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.handle = start_registry_server(port=self.port, data=self.data)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()
            self.handle = None


def make_config(lake: Path, topics: list[str], registry_url: str, **silver: Any) -> Any:
    """A validated configuration for one test's lakehouse and topics."""
    from pipelines.settings import parse_config

    return parse_config(
        {
            "lakehouse": {"path": str(lake)},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": topics},
            "registry": {"url": registry_url, "max_retries": 2, "timeout_seconds": 15.0},
            "silver": silver,
        }
    )


def write_config_file(
    path: Path, lake: Path, topics: list[str], registry_url: str, **silver: Any
) -> Path:
    """The same configuration as a TOML file (for the CLI and spark-submit)."""
    lines = [
        "[lakehouse]",
        f'path = "{lake}"',
        "[kafka]",
        f'bootstrap_servers = "{BOOTSTRAP}"',
        "topics = [" + ", ".join(f'"{t}"' for t in topics) + "]",
        "[registry]",
        f'url = "{registry_url}"',
        "max_retries = 2",
        "timeout_seconds = 15.0",
        "[silver]",
    ]
    for k, v in silver.items():
        lines.append(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def unique_prefix(name: str) -> str:
    return f"it.silver.{name}.{uuid.uuid4().hex[:8]}."


def wait_for(
    predicate: Callable[[], Any],
    seconds: float,
    what: str,
    last_seen: Callable[[], str] | None = None,
) -> None:
    """Poll ``predicate`` every half second until it is true; fail naming ``what`` and, when
    given, what ``last_seen`` says the last poll found."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    found = f"; {last_seen()}" if last_seen is not None else ""
    raise AssertionError(f"timed out after {seconds} s waiting for {what}{found}")
