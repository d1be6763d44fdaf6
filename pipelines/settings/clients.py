"""The one translation of the configuration into each client's settings.

Every job, command and DAG that talks to Kafka, the schema registry or Spark asks this module
for its settings; none reads ``[kafka]``, ``[registry]`` or ``[spark]`` and builds client
options itself. Values may be secrets (SASL passwords, registry credentials): callers hand
them to the client and log only :func:`loggable_config`.

- :func:`kafka_source_options`: Spark's Kafka source (``kafka.*`` Java client properties).
- :func:`kafka_client_conf`: confluent-kafka's clients (``protolake status|audit``, the DAGs'
  probe, the demo's producer). Java-only properties are translated where librdkafka has an
  equivalent (SASL/PLAIN and SCRAM credentials from ``sasl.jaas.config``), else left out.
- :func:`registry_client_conf`: confluent-kafka's ``SchemaRegistryClient`` (the demo).
- :func:`open_resolver`: the codec's schema resolver on the configured registry (silver,
  replay).
- :func:`open_session`: the Spark session of a job or command, with ``[spark]`` and the
  ``[catalog]`` metastore (:func:`catalog_session_conf`).
- :func:`catalog_databases`: the database of each layer's tables (``lakehouse.catalog``).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import CatalogDatabases
from pipelines.settings.config import ProtolakeConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from codec import SchemaResolver

log = logging.getLogger("pipelines.settings")

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
}
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


def kafka_client_conf(cfg: ProtolakeConfig) -> dict[str, Any]:
    """Settings for confluent-kafka clients talking to the configured cluster."""
    conf: dict[str, Any] = {"bootstrap.servers": cfg.kafka.bootstrap_servers}
    for key, value in cfg.kafka.options.items():
        if key in _PASSTHROUGH:
            conf[key] = value
        elif key == "sasl.jaas.config":
            for name, val in _JAAS_FIELD.findall(value):
                conf[f"sasl.{name}"] = val.replace('\\"', '"')
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
    """The database of each layer's tables (an empty one is not registered)."""
    c = cfg.catalog
    return CatalogDatabases(
        bronze=c.bronze_database,
        silver=c.silver_database,
        quarantine=c.quarantine_database,
        quality=c.quality_database,
    )


def open_session(cfg: ProtolakeConfig, app: str) -> SparkSession:
    """The Spark session of a job or command: Delta, the Kafka source, the ``[catalog]``
    metastore and ``[spark]`` (applied last, so it may override any of them)."""
    from pipelines.spark import build_session

    conf = {**catalog_session_conf(cfg), **cfg.spark.conf}
    return build_session(app, master=cfg.spark.master or None, conf=conf)


def loggable_config(cfg: ProtolakeConfig) -> dict[str, Any]:
    """``cfg.redacted()`` with every ``kafka.options`` value hidden too (keys stay)."""
    view = cfg.redacted()
    view["kafka"]["options"] = {key: "***" for key in view["kafka"].get("options", {})}
    return view
