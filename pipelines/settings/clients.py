"""The one translation of the configuration into each client's settings.

Every job, command and DAG that talks to Kafka, the schema registry or Spark asks this module
for its settings; none reads ``[kafka]``, ``[registry]`` or ``[spark]`` and builds client
options itself. Values may be secrets (SASL passwords, registry credentials): callers hand
them to the client and log only :func:`loggable_config`.

- :func:`kafka_source_options`: Spark's Kafka source (``kafka.*`` Java client properties).
- :func:`kafka_client_conf`: confluent-kafka's clients (``protolake status|audit``, the DAGs'
  probe, the demo's producer). Java-only properties are translated where librdkafka has an
  equivalent (SASL/PLAIN and SCRAM credentials from ``sasl.jaas.config``), else left out.
- :func:`subscribed_topics` and :func:`partition_watermarks`: the topics bronze reads, and
  the (low, high) offsets of their partitions (the DAGs' bronze lag, ``protolake status``,
  the demo's topic counts).
- :func:`registry_client_conf`: confluent-kafka's ``SchemaRegistryClient`` (the demo).
- :func:`open_resolver`: the codec's schema resolver on the configured registry (silver,
  replay).
- :func:`open_session`: the Spark session of a job or command, with ``[spark]``, the
  ``[catalog]`` metastore (:func:`catalog_session_conf`) and, for an ``s3a://`` lakehouse,
  ``[s3]`` (checked by :func:`pipelines.settings.preflight.check_lakehouse` before the job
  writes anything); :func:`prepare_session` does the same to a session the caller already has.
- :func:`catalog_databases`: the database of each layer's tables (``lakehouse.catalog``).

``[s3]``, the object store's settings, is translated by :mod:`pipelines.settings.object_store`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import CatalogDatabases
from lakehouse.layout import LAYERS
from lakehouse.lease import WriterLease, take_writer_lease
from pipelines.log_names import KAFKA_CLIENT_LOGGER
from pipelines.settings.config import ProtolakeConfig, database_key
from pipelines.settings.object_store import s3a_hadoop_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from codec import SchemaResolver

log = logging.getLogger("pipelines.settings")


def client_logging() -> dict[str, Any]:
    """The confluent-kafka setting that sends a client's log lines (librdkafka's) to Python's
    logging, :data:`~pipelines.log_names.KAFKA_CLIENT_LOGGER`, instead of stderr: quiet unless
    ``-v`` (``pipelines.cli.configure_logging``); the commands say what failed themselves."""
    return {"logger": logging.getLogger(KAFKA_CLIENT_LOGGER)}


# librdkafka understands these Java client property names as they are
_PASSTHROUGH = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "client.id",
    "isolation.level",  # the watermarks a client reads are those bronze reads up to
}
# Kafka's own topics: a pattern subscription leaves them out (exclude.internal.topics)
KAFKA_INTERNAL_TOPICS = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state"}
)
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def kafka_source_options(cfg: ProtolakeConfig) -> dict[str, str]:
    """The options of Spark's Kafka source for this configuration (values may be secret)."""
    k = cfg.kafka
    opts = {
        "kafka.bootstrap.servers": k.bootstrap_servers,
        "startingOffsets": k.starting_offsets,
        "failOnDataLoss": "true" if k.fail_on_data_loss else "false",
        "includeHeaders": "true",
        # aborted transactions' records are not records of the topic (a kafka.options entry
        # below may still choose read_uncommitted)
        "kafka.isolation.level": "read_committed",
    }
    if k.topics:
        opts["subscribe"] = ",".join(k.topics)
    else:
        opts["subscribePattern"] = k.topic_pattern
    if k.max_offsets_per_trigger > 0:
        opts["maxOffsetsPerTrigger"] = str(k.max_offsets_per_trigger)
    for key, value in k.options.items():
        opts[f"kafka.{key}"] = value
    return opts


def subscribed_topics(cfg: ProtolakeConfig, existing: Iterable[str]) -> set[str]:
    """The topics bronze reads: ``kafka.topics`` (whether they exist yet or not), or the topics
    of ``existing`` whose whole name matches ``kafka.topic_pattern``, Kafka's internal topics
    aside."""
    k = cfg.kafka
    if k.topics:
        return set(k.topics)
    pattern = re.compile(k.topic_pattern)
    return {t for t in existing if t not in KAFKA_INTERNAL_TOPICS and pattern.fullmatch(t)}


def partition_watermarks(
    consumer: Any, metadata: Any, topics: Iterable[str], timeout: float = 10.0
) -> dict[tuple[str, int], tuple[int, int]]:
    """The (low, high) offsets of every partition of ``topics``, by (topic, partition).

    Args:
        consumer: a confluent-kafka ``Consumer``; its ``isolation.level`` decides the high
            offset (under ``read_committed``, the last stable offset).
        metadata: the consumer's ``list_topics()``; a topic it lacks, or lists with an
            error, is left out (the caller decides what that means).
    """
    from confluent_kafka import TopicPartition

    out: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in sorted(set(topics)):
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            continue
        for part in sorted(info.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=timeout)
            out[(topic, part)] = (int(low), int(high))
    return out


class KafkaUnreachableError(RuntimeError):
    """The configured Kafka cluster did not answer in time."""


def check_kafka(cfg: ProtolakeConfig, timeout: float = 10.0) -> None:
    """Check that the configured Kafka cluster answers a metadata request within ``timeout``
    seconds, with the job's connection settings (:func:`kafka_client_conf`). Spark's Kafka
    source retries a cluster that does not answer without end, a warning a second: a job
    checks first.

    Spark's Java client takes settings librdkafka cannot (JKS stores, Kerberos, IAM, callback
    handlers), and a check without them could refuse a cluster the job reaches. So nothing is
    checked when a ``[kafka.options]`` key has no librdkafka equivalent, when librdkafka
    refuses a value (a SASL mechanism it was built without), or where confluent-kafka is not
    installed (the ``kafka`` extra).

    Raises:
        KafkaUnreachableError: no answer in time.
    """
    if any(key not in _PASSTHROUGH and key != "sasl.jaas.config" for key in cfg.kafka.options):
        return
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        log.debug("confluent-kafka is not installed: Kafka is not checked before the job")
        return
    settings = {
        **kafka_client_conf(cfg),
        **client_logging(),
        "socket.timeout.ms": int(timeout * 1000),
    }
    try:
        admin = AdminClient(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        log.debug("Kafka is not checked before the job: librdkafka refuses its settings (%s)", exc)
        return
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        reason = getattr(error, "str", lambda: str(error))()
        raise KafkaUnreachableError(
            f"Kafka at {cfg.kafka.bootstrap_servers} did not answer in {timeout:g} s ({reason})"
        ) from None


_JAAS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_JAAS_ESCAPE = re.compile(r"\\([0-3][0-7]{0,2}|[4-7][0-7]?|.)", re.DOTALL)


def jaas_unquoted(text: str) -> str:
    """A quoted value of ``sasl.jaas.config`` (between its quotes) as the JVM's clients read
    it: Java's ``StreamTokenizer`` turns ``\\"`` into ``"``, ``\\\\`` into ``\\``, ``\\n``
    and its kin into control characters, and an octal escape into its character."""

    def one(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped[0] in "01234567":
            return chr(int(escaped, 8))
        return _JAAS_ESCAPES.get(escaped, escaped)

    return _JAAS_ESCAPE.sub(one, text)


def kafka_client_conf(cfg: ProtolakeConfig) -> dict[str, Any]:
    """Settings for confluent-kafka clients talking to the configured cluster."""
    conf: dict[str, Any] = {"bootstrap.servers": cfg.kafka.bootstrap_servers}
    for key, value in cfg.kafka.options.items():
        if key in _PASSTHROUGH:
            conf[key] = value
        elif key == "sasl.jaas.config":
            for name, val in _JAAS_FIELD.findall(value):
                conf[f"sasl.{name}"] = jaas_unquoted(val)
        else:
            log.debug("kafka.options.%s: no librdkafka equivalent, not used here", key)
    return conf


def registry_client_conf(cfg: ProtolakeConfig) -> dict[str, Any]:
    """Credentials and TLS of confluent-kafka's ``SchemaRegistryClient`` (without ``url``)."""
    r = cfg.registry
    conf: dict[str, Any] = {}
    if r.basic_auth:
        conf["basic.auth.credentials.source"] = "USER_INFO"
        conf["basic.auth.user.info"] = r.basic_auth
    if r.bearer_token:
        conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
        conf["bearer.auth.token"] = r.bearer_token
    if r.ca_bundle:
        conf["ssl.ca.location"] = r.ca_bundle
    return conf


def open_resolver(cfg: ProtolakeConfig) -> SchemaResolver:
    """A schema resolver on the configured registry (HTTP(S) URL or ``dir:`` folder)."""
    from codec import SchemaResolver, open_registry

    r = cfg.registry
    if not r.url.startswith(("http://", "https://")):
        return SchemaResolver(open_registry(r.url))
    kwargs: dict[str, Any] = {
        "connect_timeout": r.timeout_seconds,
        "read_timeout": r.timeout_seconds,
        "max_retries": r.max_retries,
    }
    if r.basic_auth:
        kwargs["basic_auth"] = r.basic_auth
    if r.bearer_token:
        kwargs["bearer_token"] = r.bearer_token
    if r.ca_bundle:
        kwargs["ca_bundle"] = r.ca_bundle
    if r.client_cert:
        kwargs["client_cert"] = (r.client_cert, r.client_key) if r.client_key else r.client_cert
    return SchemaResolver(open_registry(r.url, **kwargs))


def catalog_session_conf(cfg: ProtolakeConfig) -> dict[str, str]:
    """Spark settings that make a session use the ``[catalog]`` metastore (empty without one).

    These are the settings any other Spark application needs to see protolake's tables by
    name (with Delta's two, ``pipelines.spark.DELTA_CONF``). ``spark.sql.catalogImplementation``
    is fixed when a process creates its first session: a process that already has a session
    keeps that session's catalog.
    """
    uri = cfg.catalog.metastore_uri
    if not uri:
        return {}
    return {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": uri}


def catalog_databases(cfg: ProtolakeConfig) -> CatalogDatabases:
    """The database of each layer's tables (an empty one is not registered).

    The one translation of the ``[catalog]`` keys (``<layer>_database``) into
    :class:`lakehouse.catalog.CatalogDatabases`.
    """
    return CatalogDatabases(
        **{layer: getattr(cfg.catalog, database_key(layer)) for layer in LAYERS}
    )


def open_session(cfg: ProtolakeConfig, app: str) -> SparkSession:
    """The Spark session of a job or command: Delta, the Kafka source, the ``[catalog]``
    metastore, for an ``s3a://`` lakehouse ``[s3]`` with the store checked
    (:func:`prepare_session`), and ``[spark]`` (applied last, so it may override any of them).

    Raises:
        pipelines.settings.preflight.StoreError: the object store refuses or cannot be reached.
    """
    from pipelines.spark import build_session

    conf = catalog_session_conf(cfg)
    conf.update({f"spark.hadoop.{k}": v for k, v in s3a_hadoop_conf(cfg).items()})
    conf.update(cfg.spark.conf)
    spark = build_session(app, master=cfg.spark.master or None, conf=conf)
    prepare_session(spark, cfg)
    return spark


def prepare_session(spark: SparkSession, cfg: ProtolakeConfig) -> None:
    """Give a running session the lakehouse's ``[s3]`` settings and check its store (a plain
    lakehouse path: that Spark reads it as a local folder too, ``preflight.check_local_root``).

    The settings go into the session's Hadoop configuration (read by every S3A file system
    created after, on the driver and, through the jobs' serialized configuration, on the
    executors). Nothing is done for a local lakehouse.

    Raises:
        pipelines.settings.preflight.StoreError: the object store refuses or cannot be reached.
    """
    from pipelines.settings.preflight import check_lakehouse, check_local_root

    check_local_root(spark, cfg)
    hadoop = s3a_hadoop_conf(cfg)
    if not hadoop:
        return

    jconf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in hadoop.items():
        jconf.set(key, value)
    check_lakehouse(spark, cfg)


def loggable_config(cfg: ProtolakeConfig) -> dict[str, Any]:
    """``cfg.redacted()`` with every ``kafka.options`` value hidden too (keys stay)."""
    view = cfg.redacted()
    view["kafka"]["options"] = {key: "***" for key in view["kafka"].get("options", {})}
    return view


def writer_lease(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    job: str,
    on_lost: Callable[[str], None] | None = None,
) -> WriterLease | None:
    """The writer lease of ``job``'s tables for ``cfg``'s lakehouse, valid
    ``lakehouse.writer_lease_seconds`` after each renewal (None: a local lakehouse).

    Raises:
        lakehouse.lease.WriterLeaseError: another driver holds it.
    """
    ttl = cfg.lakehouse.writer_lease_seconds
    return take_writer_lease(spark, cfg.lakehouse_path, job, on_lost=on_lost, ttl=ttl)
