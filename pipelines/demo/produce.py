"""The demo's side of the stack: probing Kafka and the registry, creating the topics, producing.

- :func:`check_stack` lists what does not answer (Kafka's metadata, the registry's
  ``GET /subjects``); :func:`count_topic_records` counts what the topics hold.
- :func:`produce_demo_stream` creates the demo topics (``PARTITIONS`` each; existing topics
  are kept) and sends a :class:`pipelines.demo.generate.DemoStream` with confluent-kafka's
  ``Producer`` (idempotent, ``acks=all``); keys are hashed by librdkafka's default partitioner,
  so partitions too are a function of the seed. It raises
  :class:`pipelines.demo.stream.DemoStreamError` when the schemas do not compile, or the
  broker or the registry refuses a record.
"""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from pipelines.demo.generate import DemoStream
from pipelines.demo.schemas import load_schema_versions
from pipelines.demo.stream import PARTITIONS, DemoStreamError, DemoStreamSummary, demo_topics
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import (
    KafkaUnreachableError,
    check_kafka,
    client_logging,
    partition_watermarks,
)
from pipelines.settings.redaction import redact_url


def check_stack(cfg: ProtolakeConfig, timeout: float = 5.0) -> list[str]:
    """Problems reaching Kafka and the registry; empty when both answer."""
    problems = [
        _kafka_problem(cfg, timeout),
        _registry_problem(cfg, timeout),
    ]
    return [p for p in problems if p]


def _kafka_problem(cfg: ProtolakeConfig, timeout: float) -> str | None:
    bootstrap = cfg.kafka.bootstrap_servers
    # librdkafka waits its whole timeout for a broker that is not there; a refused TCP
    # connection to every bootstrap address says so at once.
    refused = _refused_addresses(bootstrap, timeout)
    if refused:
        return f"Kafka does not answer at {bootstrap} ({refused})"
    try:
        check_kafka(cfg, timeout)
    except KafkaUnreachableError as exc:
        return str(exc)
    return None


def _refused_addresses(bootstrap: str, timeout: float) -> str | None:
    """The first refusal when no bootstrap address accepts a TCP connection, else None."""
    first = None
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition("://")[2].rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except (OSError, ValueError) as exc:
            first = first or first_line(exc)
    return first


def _registry_problem(cfg: ProtolakeConfig, timeout: float) -> str | None:
    url = cfg.registry.url.rstrip("/")
    shown = redact_url(url)
    if url.startswith("dir:"):
        return f"the demo needs an HTTP schema registry; registry.url is {shown}"
    request = urllib.request.Request(f"{url}/subjects")
    if cfg.registry.basic_auth:
        token = b64encode(cfg.registry.basic_auth.encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        return f"the schema registry at {shown} answers HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"the schema registry does not answer at {shown} ({reason})"
    return None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def count_topic_records(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Records each topic holds (high minus low watermark, summed over partitions; 0 if absent)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "protolake-demo-probe",
            "enable.auto.commit": False,
            **client_logging(),
        }
    )
    try:
        marks = partition_watermarks(consumer, consumer.list_topics(timeout=10), topics)
        counts = dict.fromkeys(topics, 0)
        for (topic, _), (low, high) in marks.items():
            counts[topic] += max(high - low, 0)
        return counts
    finally:
        consumer.close()


def ensure_topics(
    bootstrap: str,
    topics: Iterable[str],
    client_conf: Mapping[str, Any] | None = None,
    partitions: int = PARTITIONS,
) -> None:
    """Create the topics that do not exist yet (replication factor 1).

    Raises:
        DemoStreamError: the broker is unreachable or refuses to create a topic.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **client_logging(), **(client_conf or {})})
    try:
        existing = set(admin.list_topics(timeout=10).topics)
    except KafkaException as exc:
        raise DemoStreamError(f"Kafka at {bootstrap} is not reachable: {exc}") from exc
    wanted = [
        NewTopic(t, num_partitions=partitions, replication_factor=1)
        for t in topics
        if t not in existing
    ]
    if not wanted:
        return
    for topic, future in admin.create_topics(wanted, operation_timeout=30).items():
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # created concurrently: fine
            raise DemoStreamError(f"could not create topic {topic}: {exc}") from exc


def produce_demo_stream(
    bootstrap: str,
    registry_url: str,
    *,
    topic_prefix: str = "demo.",
    records: int = 3000,
    seed: int = 7,
    poison_every: int = 50,
    registry_conf: Mapping[str, Any] | None = None,
    producer_conf: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> DemoStreamSummary:
    """Create the topics, produce the demo stream (module docstring) and return its summary.

    Args:
        bootstrap: Kafka bootstrap servers.
        registry_url: schema registry URL.
        topic_prefix: prepended to every topic name.
        records: total number of records, poison records included.
        seed: seed of the generator; equal seeds give equal streams.
        poison_every: every n-th record is a poison record (0: none).
        registry_conf: extra ``SchemaRegistryClient`` settings (e.g. ``basic.auth.user.info``).
        producer_conf: extra librdkafka producer settings (e.g. security settings).
        cache_dir: where compiled schemas are cached.
        on_progress: called with the number of records sent so far, every 1% of them.

    Raises:
        DemoStreamError: schemas did not compile, or the broker or registry failed.
    """
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient

    versions = load_schema_versions(cache_dir)
    ensure_topics(bootstrap, demo_topics(topic_prefix), producer_conf)
    client = SchemaRegistryClient.new_client({"url": registry_url, **(registry_conf or {})})
    stream = DemoStream(
        client,
        topic_prefix=topic_prefix,
        records=records,
        seed=seed,
        poison_every=poison_every,
        versions=versions,
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "client.id": "protolake-demo",
            **client_logging(),
            **(producer_conf or {}),
        }
    )
    _send(producer, stream, bootstrap, on_progress)
    return stream.summary


def _send(
    producer: Any,
    stream: DemoStream,
    bootstrap: str,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Produce every record of the stream and wait for all deliveries."""
    from confluent_kafka import KafkaException

    failures: list[str] = []
    step = max(1, stream.records // 100)

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}: {err}")

    for sent, record in enumerate(stream, 1):
        while True:
            try:
                producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=cast(Any, record.headers) or None,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.5)  # local queue full: let deliveries drain, then retry
            except KafkaException as exc:
                raise DemoStreamError(f"could not produce to {record.topic}: {exc}") from exc
        producer.poll(0)
        if on_progress is not None and (sent % step == 0 or sent == stream.records):
            on_progress(sent)
    remaining = producer.flush(60)
    if remaining:
        raise DemoStreamError(f"{remaining} records not delivered to {bootstrap} within 60 s")
    if failures:
        raise DemoStreamError(f"{len(failures)} records failed delivery, first: {failures[0]}")
