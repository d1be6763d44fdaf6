"""The rules a loaded configuration's values must follow (``config.parse_config`` runs
:func:`check_config` once every section is built): one :class:`ConfigError` naming the first
key that breaks one, before any job starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lakehouse.bronze_columns import BRONZE_TABLE_COLUMNS
from lakehouse.layout import LAYERS
from lakehouse.streaming import TRIGGERS
from pipelines.settings.config import (
    SAFE_RETENTION_HOURS,
    CatalogConfig,
    ConfigError,
    ProtolakeConfig,
    RegistryConfig,
    S3Config,
    database_key,
)
from pipelines.settings.redaction import redact_url

# the URL schemes codec.open_registry opens (a path without one is a folder: the host that runs
# the job has it, not always the one that loads the configuration)
_REGISTRY_SCHEMES = ("http://", "https://", "dir:", "file://")


def check_config(cfg: ProtolakeConfig) -> None:
    """Check the values of a built configuration (each section's types are checked as it is
    built); the first one wrong raises :class:`ConfigError` naming its key."""
    k = cfg.kafka
    if not k.bootstrap_servers:
        raise ConfigError('kafka.bootstrap_servers: missing value (e.g. "127.0.0.1:9092")')
    if bool(k.topics) == bool(k.topic_pattern):
        raise ConfigError("kafka.topics / kafka.topic_pattern: give exactly one of them")
    if k.max_offsets_per_trigger < 0:
        raise ConfigError("kafka.max_offsets_per_trigger: must be >= 0")
    for key in k.options:
        if key.startswith("kafka."):
            raise ConfigError(f"kafka.options.{key}: write the Kafka property without 'kafka.'")
    if cfg.bronze.table_mode not in ("per_topic", "single"):
        raise ConfigError('bronze.table_mode: must be "per_topic" or "single"')
    if not re.fullmatch(r"[A-Za-z0-9_]+", cfg.bronze.single_table):
        raise ConfigError("bronze.single_table: letters, digits and '_' only")
    for section, trigger in (("bronze", cfg.bronze.trigger), ("silver", cfg.silver.trigger)):
        if trigger not in TRIGGERS:
            raise ConfigError(f"{section}.trigger: must be one of {', '.join(TRIGGERS)}")
    if cfg.silver.table_discovery_seconds <= 0:
        raise ConfigError("silver.table_discovery_seconds: must be > 0")
    if cfg.silver.max_recursion_depth < 1:
        raise ConfigError("silver.max_recursion_depth: must be >= 1")
    _check_registry(cfg.registry)
    unknown = [c for c in cfg.bronze.partition_by if c not in BRONZE_TABLE_COLUMNS]
    if unknown:
        raise ConfigError(
            f"bronze.partition_by: {', '.join(unknown)} is no bronze column "
            f"(bronze's columns: {', '.join(BRONZE_TABLE_COLUMNS)})"
        )
    if cfg.registry.max_retries < 0 or cfg.registry.timeout_seconds <= 0:
        raise ConfigError("registry.max_retries / registry.timeout_seconds: must be positive")
    if not (0 <= cfg.metrics.prometheus_port < 65535):
        raise ConfigError(
            "metrics.prometheus_port: must be a port number below 65535 (silver serves on the "
            "next one) or 0"
        )
    if not cfg.metrics.prometheus_address.strip():
        raise ConfigError("metrics.prometheus_address: must be an interface address")
    if not cfg.lakehouse.path:
        raise ConfigError("lakehouse.path: missing value")
    if cfg.lakehouse.writer_lease_seconds <= 0:
        raise ConfigError("lakehouse.writer_lease_seconds: must be > 0")
    _check_catalog(cfg.catalog)
    _check_s3(cfg.s3)
    if cfg.quality.results_retention_days < 0:
        raise ConfigError("quality.results_retention_days: must be >= 0 (0 keeps every result)")
    _check_quality_rules(cfg.quality.expectations)
    m = cfg.maintenance
    if m.stream_optimize_minutes < 0 or m.stream_vacuum_hours < 0:
        raise ConfigError(
            "maintenance.stream_optimize_minutes / maintenance.stream_vacuum_hours: must be >= 0"
            " (0: never)"
        )
    if m.stream_retention_hours < SAFE_RETENTION_HOURS:
        raise ConfigError(
            f"maintenance.stream_retention_hours: must be >= {SAFE_RETENTION_HOURS} (Delta's "
            "safety minimum: a running stream's VACUUM never goes below it)"
        )


def _check_registry(r: RegistryConfig) -> None:
    if not r.url:
        raise ConfigError("registry.url: missing value")
    typo = re.fullmatch(r"[\w.-]+:\d+(/.*)?|https?:/?[^/].*", r.url) is not None
    if typo or ("://" in r.url and not r.url.startswith(_REGISTRY_SCHEMES)):
        raise ConfigError(
            "registry.url: must be http(s)://host[:port], dir:/folder or a folder, "
            f"got {redact_url(r.url)!r}"
        )
    if r.basic_auth and r.bearer_token:
        raise ConfigError("registry.basic_auth / registry.bearer_token: give one, not both")


def _check_catalog(c: CatalogConfig) -> None:
    if c.metastore_uri and not re.fullmatch(
        r"thrift://[^\s,]+(,thrift://[^\s,]+)*", c.metastore_uri
    ):
        raise ConfigError(
            'catalog.metastore_uri: must be "thrift://host:port" (comma-separated for several)'
        )
    keys_of: dict[str, list[str]] = {}
    for key in map(database_key, LAYERS):
        if not re.fullmatch(r"[A-Za-z0-9_]*", getattr(c, key)):
            raise ConfigError(f"catalog.{key}: letters, digits and '_' only (or empty)")
        if getattr(c, key):  # the metastore folds a database's name to lower case
            keys_of.setdefault(getattr(c, key).lower(), []).append(key)
    for database, keys in keys_of.items():
        if len(keys) > 1:
            raise ConfigError(
                f"catalog.{' / catalog.'.join(keys)}: one database each ({database!r} twice); "
                "the layers' table names can clash (the quarantine's and a single bronze "
                "table are both 'records')"
            )


def _check_s3(s3: S3Config) -> None:
    if bool(s3.access_key_id) != bool(s3.secret_access_key):
        raise ConfigError(
            "s3.access_key_id / s3.secret_access_key: give both, or neither (the default AWS "
            "credential provider chain)"
        )
    if s3.session_token and not s3.access_key_id:
        raise ConfigError("s3.session_token: needs s3.access_key_id and s3.secret_access_key")
    if s3.endpoint and "@" in s3.endpoint:
        raise ConfigError(
            "s3.endpoint: no credentials in the URL; give them as s3.access_key_id / "
            "s3.secret_access_key"
        )
    if s3.endpoint and not re.match(r"https?://[^/\s]+/?$", s3.endpoint):
        raise ConfigError(f"s3.endpoint: must be http(s)://host[:port], got {s3.endpoint!r}")


def _check_quality_rules(rules: tuple[Mapping[str, Any], ...]) -> None:
    """The configured expectations, checked the way silver will (``quality.rules.parse_rules``)."""
    if not rules:
        return
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        return  # silver checks them when it starts, and refuses to run without the extra
    from quality.rules import QualityConfigError, parse_rules

    try:
        parse_rules(list(rules))
    except QualityConfigError as exc:
        raise ConfigError(str(exc)) from exc
