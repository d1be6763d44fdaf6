"""Helpers of the bronze integration tests: produce records, remember exactly what the broker
acknowledged, write configuration files, read bronze tables back."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]

# (topic, partition, offset) -> (key, value, headers, timestamp ms)
Expected = dict[
    tuple[str, int, int], tuple[bytes | None, bytes, tuple[tuple[str, bytes | None], ...], int]
]


def unique_prefix(name: str) -> str:
    return f"it.bronze.{name}.{uuid.uuid4().hex[:8]}"


@dataclass
class Kafka:
    """Creates topics and produces records, remembering exactly what the broker acknowledged."""

    bootstrap: str
    expected: Expected = field(default_factory=dict)

    def create_topics(self, *topics: str, partitions: int = 2) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
        for future in futures.values():
            future.result(timeout=30)

    def produce(
        self, topic: str, count: int, start: int = 0, producer: Producer | None = None
    ) -> Expected:
        """Produce ``count`` records (some null keys, binary values, headers incl. a null one)
        and wait until the broker acknowledged them all."""
        producer = producer or Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        acked: Expected = {}
        errors: list[str] = []
        for i in range(start, start + count):
            key, value, headers = record(topic, i)
            producer.produce(
                topic,
                value=value,
                key=key,
                headers=list(headers),
                on_delivery=_remember(acked, errors, headers),
            )
            producer.poll(0)
        remaining = producer.flush(30)
        assert remaining == 0 and not errors, f"produce failed: {errors[:3]}"
        self.expected.update(acked)
        return acked


def record(topic: str, i: int) -> tuple[bytes | None, bytes, tuple[tuple[str, bytes | None], ...]]:
    """The i-th test record of a topic: key (every 4th null), binary value, three headers."""
    key = None if i % 4 == 0 else f"key-{i}".encode()
    value = bytes([0, 0xFF, i % 256]) + f"{topic}/{i}".encode() + bytes(i % 7)
    return key, value, (("seq", str(i).encode()), ("bin", b"\x00\xfe"), ("null", None))


def _remember(
    acked: Expected, errors: list[str], headers: tuple[tuple[str, bytes | None], ...]
) -> Any:
    # Delivery reports carry no headers: keep the ones we sent.
    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
            return
        acked[(msg.topic(), msg.partition(), msg.offset())] = (
            msg.key(),
            msg.value(),
            headers,
            msg.timestamp()[1],
        )

    return on_delivery


def write_config(
    path: Path,
    lakehouse: Path,
    bootstrap: str,
    *,
    topics: Iterable[str] = (),
    pattern: str = "",
    extra: str = "",
) -> Path:
    kafka = (
        f"topics = {list(topics)!r}".replace("'", '"') if topics else f"topic_pattern = '{pattern}'"
    )
    path.write_text(
        f'[lakehouse]\npath = "{lakehouse}"\n'
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\n{kafka}\n' + extra,
        encoding="utf-8",
    )
    return path


def read_bronze(spark: Any, table_path: Path | str) -> tuple[Expected, int]:
    """Rows of a bronze table as ``Expected`` plus the raw row count (to see duplicates)."""
    rows = spark.read.format("delta").load(str(table_path)).collect()
    got: Expected = {}
    for r in rows:
        got[(r.topic, r.partition, r.offset)] = (
            None if r.key is None else bytes(r.key),
            bytes(r.value),
            tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers),
            int(r.timestamp.timestamp() * 1000 + 0.5) if r.timestamp else -1,
        )
    return got, len(rows)


def only(expected: Expected, *topics: str) -> Expected:
    return {k: v for k, v in expected.items() if k[0] in topics}
