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
- :func:`s3a_hadoop_conf`: ``[s3]`` as S3A settings of the lakehouse's bucket (Hadoop's
  per-bucket ``fs.s3a.bucket.<bucket>.*`` keys: other buckets keep their own settings).
- :func:`delta_storage_options`: ``[s3]`` as delta-rs (``deltalake``) storage options, for the
  readers and writers without Spark (quality results, the DAGs' table figures, tests).
- :func:`lakehouse_store`: the lakehouse's :class:`lakehouse.store.Store` for the readers
  without a JVM (the DAGs' tables and checkpoints): a pyarrow ``S3FileSystem`` from ``[s3]``
  with :func:`delta_storage_options`, or this machine's file system.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import CatalogDatabases
from lakehouse.layout import LAYERS, Layout, has_scheme
from lakehouse.lease import WriterLease, take_writer_lease
from lakehouse.store import OBJECT_STORE_SCHEMES, Store
from pipelines.log_names import KAFKA_CLIENT_LOGGER
from pipelines.settings.config import ProtolakeConfig, database_key

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


#: seconds to connect to the object store (its client here, and the check before a job)
CONNECT_TIMEOUT = 5.0
# S3A's credential providers: static keys (with a session token: temporary ones), or the AWS
# SDK's default chain (environment, system properties, web identity, ~/.aws profiles,
# container and instance roles).
_STATIC_KEYS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY_KEYS = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
_DEFAULT_CHAIN = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"


def lakehouse_bucket(cfg: ProtolakeConfig) -> str | None:
    """The bucket of an ``s3a://bucket/prefix`` lakehouse; None for any other root."""
    root = cfg.lakehouse.path
    if not has_scheme(root) or root.split("://", 1)[0].lower() not in OBJECT_STORE_SCHEMES:
        return None
    return root.split("://", 1)[1].split("/", 1)[0]


def s3a_hadoop_conf(cfg: ProtolakeConfig) -> dict[str, str]:
    """``[s3]`` as Hadoop S3A settings of the lakehouse's bucket (values may be secret).

    Empty when the lakehouse is not on S3. Keys are per bucket (``fs.s3a.bucket.<b>.endpoint``,
    ...); :func:`open_session` passes them as ``spark.hadoop.*`` settings.
    """
    bucket = lakehouse_bucket(cfg)
    if bucket is None:
        return {}
    s3 = cfg.s3
    conf: dict[str, str] = {
        "path.style.access": "true" if s3.path_style_access else "false",
        # If-None-Match puts, for the writer leases of lakehouse.lease
        "create.conditional.enabled": "true",
    }
    if s3.endpoint:
        conf["endpoint"] = s3.endpoint.rstrip("/")
        conf["connection.ssl.enabled"] = "true" if s3.endpoint.startswith("https:") else "false"
    if s3.region:
        conf["endpoint.region"] = s3.region
    elif s3.endpoint:
        conf["endpoint.region"] = "us-east-1"  # an S3-compatible store: any region signs
    if s3.access_key_id:
        conf["access.key"] = s3.access_key_id
        conf["secret.key"] = s3.secret_access_key
        conf["aws.credentials.provider"] = _STATIC_KEYS
        if s3.session_token:
            conf["session.token"] = s3.session_token
            conf["aws.credentials.provider"] = _TEMPORARY_KEYS
    else:
        conf["aws.credentials.provider"] = _DEFAULT_CHAIN
    settings = {f"fs.s3a.bucket.{bucket}.{key}": value for key, value in conf.items()}
    if cfg.lakehouse.path.split("://", 1)[0].lower() == "s3":
        # Hadoop has no file system for s3:// of its own: S3A serves it, with the same settings
        settings["fs.s3.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        settings["fs.AbstractFileSystem.s3.impl"] = "org.apache.hadoop.fs.s3a.S3A"
    return settings


def delta_storage_options(cfg: ProtolakeConfig) -> dict[str, str]:
    """``[s3]`` as delta-rs storage options (empty for a local lakehouse; values may be secret).

    Without keys in ``[s3]``, delta-rs finds credentials as the AWS SDKs do (environment,
    profiles, instance roles).
    """
    if lakehouse_bucket(cfg) is None:
        return {}
    s3 = cfg.s3
    opts: dict[str, str] = {
        "AWS_REGION": s3.region or "us-east-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if s3.path_style_access else "true",
    }
    if s3.endpoint:
        opts["AWS_ENDPOINT_URL"] = s3.endpoint.rstrip("/")
        if s3.endpoint.startswith("http:"):
            opts["AWS_ALLOW_HTTP"] = "true"
    if s3.access_key_id:
        opts["AWS_ACCESS_KEY_ID"] = s3.access_key_id
        opts["AWS_SECRET_ACCESS_KEY"] = s3.secret_access_key
        if s3.session_token:
            opts["AWS_SESSION_TOKEN"] = s3.session_token
    return opts


def lakehouse_store(cfg: ProtolakeConfig) -> Store | None:
    """The lakehouse's files without a JVM: for an ``s3a://`` lakehouse a pyarrow
    ``S3FileSystem`` with ``[s3]`` (keys, else the AWS default chain; the endpoint, its scheme,
    the region and the addressing style) and :func:`delta_storage_options`; for a local one,
    this machine's file system; None for any other file system (``abfss://``, ``gs://``, ...).

    The store holds credentials: hand it to readers, never log it.
    """
    if lakehouse_bucket(cfg) is None:
        return Store.local() if Layout(cfg.lakehouse_path).is_local else None
    from pyarrow import fs

    s3 = cfg.s3
    options: dict[str, Any] = {
        "region": s3.region or "us-east-1",
        "force_virtual_addressing": not s3.path_style_access,
        "connect_timeout": CONNECT_TIMEOUT,
        "request_timeout": 30.0,
    }
    if s3.endpoint:
        scheme, _, host = s3.endpoint.rstrip("/").partition("://")
        options.update(endpoint_override=host, scheme=scheme)
    if s3.access_key_id:
        options.update(
            access_key=s3.access_key_id,
            secret_key=s3.secret_access_key,
            session_token=s3.session_token or None,
        )
    filesystem = fs.S3FileSystem(**options)
    return Store(filesystem, delta_storage_options(cfg), object_store=True)


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
