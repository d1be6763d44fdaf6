"""protolake's configuration: one TOML file, validated on load.

The same file serves ``protolake <job> --config FILE`` on a laptop and ``spark-submit`` on a
cluster. Contract:

- Unknown keys and missing required values raise :class:`ConfigError` naming the key
  (``kafka.bootstraps_servers: unknown key``), before any job starts.
- ``${env:NAME}`` anywhere in a string value is replaced by the environment variable NAME;
  an unset variable is an error naming it. Secrets (passwords, tokens, JAAS configs) belong
  there, never in the file. :meth:`ProtolakeConfig.redacted` gives a loggable view.
- Relative paths (``lakehouse.path``) are resolved against the current directory.
- ``[[quality.expectations]]`` rules are checked on load as well (``quality.rules.parse_rules``:
  names and arguments against Great Expectations, policies, regular expressions), so that no
  job, bronze included, starts with a broken rule. Needs the quality extra; without it the rules
  are checked when silver starts (which then refuses to run).

Example (every key, with its default)::

    [lakehouse]
    path = "./lakehouse"                     # or "s3a://bucket/prefix" (then [s3] applies)
    writer_lease_seconds = 120               # object store: a dead writer's lease expires after

    [s3]                                     # the object store of an s3a:// lakehouse
    endpoint = ""                            # empty: AWS; "http://127.0.0.1:8333" for a local store
    region = ""                              # empty: the AWS provider chain's region (else us-east-1)
    path_style_access = false                # true for most S3-compatible stores
    access_key_id = ""                       # "${env:AWS_ACCESS_KEY_ID}"; empty (with the secret):
    secret_access_key = ""                   # the default AWS credential provider chain
    session_token = ""                       # optional (temporary credentials)

    [kafka]
    bootstrap_servers = "127.0.0.1:9092"     # required
    topics = ["shop.orders"]                 # or topic_pattern = "shop\\..*" (exactly one of them)
    starting_offsets = "earliest"            # earliest | latest | JSON per partition
    max_offsets_per_trigger = 0              # 0 = unlimited
    fail_on_data_loss = true
    [kafka.options]                          # passed through as kafka.<key> to Spark's source
    "isolation.level" = "read_committed"     # bronze's default; "read_uncommitted" also reads
                                             # records of aborted transactions
    "security.protocol" = "SASL_SSL"
    "sasl.jaas.config" = "${env:KAFKA_JAAS}"

    [registry]
    url = "http://127.0.0.1:8081"            # or "dir:/path/to/schemas" (directory registry)
    basic_auth = "${env:REGISTRY_AUTH}"      # "user:pass", optional
    bearer_token = ""                        # optional
    ca_bundle = ""                           # optional path
    client_cert = ""                         # optional path (PEM with key, or cert)
    client_key = ""                          # optional path
    timeout_seconds = 10.0
    max_retries = 5

    [bronze]
    table_mode = "per_topic"                 # per_topic | single (one silver query)
    single_table = "records"                 # table name when table_mode = "single"
    partition_by = ["_ingest_date"]
    trigger = "available-now"                # available-now | processing-time
    processing_interval = "30 seconds"

    [silver]
    trigger = "available-now"
    processing_interval = "30 seconds"
    max_recursion_depth = 3                  # deeper levels of recursive messages become JSON text
    keep_unknown_fields = false              # false: UNKNOWN_FIELDS goes to quarantine
    native_decoder = true                    # compiled decoder where it applies (needs a C compiler)
    cache_bronze = false                     # true: cache each batch once instead of re-reading it per
                                             # pass (better when reads are slow, e.g. object storage)
    table_discovery_seconds = 5.0            # processing-time: how often bronze/ is listed for new
                                             # tables (each gets its query without a restart)

    [quality]
    results_retention_days = 0               # > 0: silver deletes older quality results when it starts

    [[quality.expectations]]
    message_type = "shop.v1.Order"
    expectation = "expect_column_values_to_not_be_null"
    kwargs = { column = "order_id" }
    policy = "quarantine"                    # warn | quarantine | fail

    [maintenance]                            # processing-time streams on an object store keep
                                             # the tables they write (`protolake maintain` is
                                             # refused their writer lease while they run):
    stream_optimize_minutes = 60.0           # OPTIMIZE them this often (0: never)
    stream_vacuum_hours = 24.0               # VACUUM them this often (0: never),
    stream_retention_hours = 168.0           # keeping files removed this recently (>= 168)

    [catalog]                                # where every table is registered by name
    metastore_uri = ""                       # "thrift://127.0.0.1:9083": a shared Hive metastore
                                             # (infra/stack.sh up metastore); empty: the session's own
                                             # catalog (in memory, or what spark.conf configures)
    bronze_database = "bronze"               # a layer's database; "" = do not register that layer
    silver_database = "silver"
    quarantine_database = "quarantine"       # its one table: quarantine.records
    quality_database = "quality"             # its one table: quality.results

    [metrics]
    prometheus_port = 0                      # bronze's endpoint (silver's: the next port); 0 = none
    prometheus_address = "0.0.0.0"          # interface the endpoint listens on ("127.0.0.1": this host only)

    [spark]
    master = ""                              # empty: local[2] in-process, or what spark-submit set
    [spark.conf]
    "spark.sql.shuffle.partitions" = "4"
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lakehouse.bronze_columns import INGEST_DATE
from lakehouse.catalog import CatalogDatabases
from pipelines.settings.redaction import redacted_view

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(ValueError):
    """The configuration file is invalid; the message names the offending key."""


@dataclass(frozen=True)
class LakehouseConfig:
    path: str = "./lakehouse"
    writer_lease_seconds: float = 120.0


@dataclass(frozen=True)
class S3Config:
    endpoint: str = ""
    region: str = ""
    path_style_access: bool = False
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""


@dataclass(frozen=True)
class KafkaConfig:
    bootstrap_servers: str = ""
    topics: tuple[str, ...] = ()
    topic_pattern: str = ""
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 0
    fail_on_data_loss: bool = True
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RegistryConfig:
    url: str = "http://127.0.0.1:8081"
    basic_auth: str = ""
    bearer_token: str = ""
    ca_bundle: str = ""
    client_cert: str = ""
    client_key: str = ""
    timeout_seconds: float = 10.0
    max_retries: int = 5


@dataclass(frozen=True)
class BronzeConfig:
    table_mode: str = "per_topic"
    single_table: str = "records"
    partition_by: tuple[str, ...] = (INGEST_DATE,)
    trigger: str = "available-now"
    processing_interval: str = "30 seconds"


@dataclass(frozen=True)
class SilverConfig:
    trigger: str = "available-now"
    processing_interval: str = "30 seconds"
    max_recursion_depth: int = 3
    keep_unknown_fields: bool = False
    native_decoder: bool = True
    cache_bronze: bool = False
    table_discovery_seconds: float = 5.0


@dataclass(frozen=True)
class QualityConfig:
    # Raw rule tables; quality.rules.parse_rules validates them against Great Expectations at start-up.
    expectations: tuple[Mapping[str, Any], ...] = ()
    # > 0: silver deletes rows of quality/results validated longer ago than this when it starts
    results_retention_days: int = 0


#: VACUUM's least retention: Delta's own safety minimum (running streams and readers keep
#: their files)
SAFE_RETENTION_HOURS = 168


@dataclass(frozen=True)
class MaintenanceConfig:
    # processing-time streams on an object store maintain the tables they write
    # (pipelines.stream_maintenance); 0 turns either off
    stream_optimize_minutes: float = 60.0
    stream_vacuum_hours: float = 24.0
    stream_retention_hours: float = float(SAFE_RETENTION_HOURS)


# The database of each layer by default: lakehouse.catalog.CatalogDatabases spells them.
_DATABASES = CatalogDatabases()


def database_key(layer: str) -> str:
    """The ``[catalog]`` key of a layer's database (``"silver"`` -> ``"silver_database"``)."""
    return f"{layer}_database"


@dataclass(frozen=True)
class CatalogConfig:
    metastore_uri: str = ""
    # one key a layer, named by database_key; pipelines.settings.clients.catalog_databases
    # turns them into the CatalogDatabases that lakehouse.catalog takes
    bronze_database: str = _DATABASES.bronze
    silver_database: str = _DATABASES.silver
    quarantine_database: str = _DATABASES.quarantine
    quality_database: str = _DATABASES.quality


@dataclass(frozen=True)
class MetricsConfig:
    prometheus_port: int = 0
    prometheus_address: str = "0.0.0.0"


@dataclass(frozen=True)
class SparkConfig:
    master: str = ""
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProtolakeConfig:
    lakehouse: LakehouseConfig = field(default_factory=LakehouseConfig)
    s3: S3Config = field(default_factory=S3Config)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    registry: RegistryConfig = field(default_factory=RegistryConfig)
    bronze: BronzeConfig = field(default_factory=BronzeConfig)
    silver: SilverConfig = field(default_factory=SilverConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: str = ""  # the file it was loaded from, for messages

    @property
    def lakehouse_path(self) -> str:
        """Absolute path (or URI) of the lakehouse root."""
        p = self.lakehouse.path
        return p if "://" in p else str(Path(p).expanduser().resolve())

    def redacted(self) -> dict[str, Any]:
        """A loggable view: every value whose key looks secret is replaced by ``***``."""
        return redacted_view(self)


_SECTIONS: dict[str, type] = {
    "lakehouse": LakehouseConfig,
    "s3": S3Config,
    "kafka": KafkaConfig,
    "registry": RegistryConfig,
    "bronze": BronzeConfig,
    "silver": SilverConfig,
    "quality": QualityConfig,
    "maintenance": MaintenanceConfig,
    "catalog": CatalogConfig,
    "metrics": MetricsConfig,
    "spark": SparkConfig,
}
# Keys whose values are free-form string maps (their own keys are not checked).
_MAPS = {("kafka", "options"), ("spark", "conf")}


def load_config(
    path: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> ProtolakeConfig:
    """Read, substitute ``${env:NAME}`` and validate a TOML configuration file.

    Raises:
        ConfigError: the file is missing, not TOML, or a key is unknown, missing or invalid.
    """
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {path}") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"{path}: a folder, not a configuration file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): not a TOML file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(raw, env=env, source=str(path))


def parse_config(
    raw: Mapping[str, Any], env: Mapping[str, str] | None = None, source: str = "<dict>"
) -> ProtolakeConfig:
    """Validate an already-parsed configuration mapping (see :func:`load_config`)."""
    environ = os.environ if env is None else env
    values = _substitute(raw, environ, "")
    sections: dict[str, Any] = {}
    for name, section in values.items():
        cls = _SECTIONS.get(name)
        if cls is None:
            raise ConfigError(f"{name}: unknown section (known: {', '.join(_SECTIONS)})")
        if not isinstance(section, Mapping):
            raise ConfigError(f"{name}: must be a table")
        sections[name] = _build(cls, name, section)
    cfg = ProtolakeConfig(**sections, source=source)
    from pipelines.settings.checks import check_config  # its rules import this module's types

    check_config(cfg)
    return cfg


def _substitute(value: Any, env: Mapping[str, str], key: str) -> Any:
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in env:
                raise ConfigError(f"{key}: environment variable {name} is not set")
            return env[name]

        return _ENV_REF.sub(repl, value)
    if isinstance(value, Mapping):
        return {k: _substitute(v, env, f"{key}.{k}" if key else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, env, f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def _build(cls: type, section: str, data: Mapping[str, Any]) -> Any:
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{section}.{key}"
        if key not in known:
            raise ConfigError(f"{where}: unknown key (known: {', '.join(sorted(known))})")
        default = getattr(cls(), key)
        if (section, key) in _MAPS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: must be a table of strings")
            kwargs[key] = {str(k): _scalar_str(v, f"{where}.{k}") for k, v in value.items()}
        elif section == "quality" and key == "expectations":
            if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
                raise ConfigError(f"{where}: must be an array of tables ([[quality.expectations]])")
            kwargs[key] = tuple(dict(v) for v in value)
        elif isinstance(default, tuple):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: must be an array of strings")
            kwargs[key] = tuple(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: must be true or false, got {_shown(value)}")
            kwargs[key] = value
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where}: must be an integer, got {_shown(value)}")
            kwargs[key] = value
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{where}: must be a number, got {_shown(value)}")
            kwargs[key] = float(value)
        else:
            if not isinstance(value, str):
                raise ConfigError(f"{where}: must be a string, got {_shown(value)}")
            kwargs[key] = value
    return cls(**kwargs)


def _shown(value: Any) -> str:
    """A wrong value as an error names it: a number or a boolean as written; anything else
    by its kind alone, since a string (also inside an array or a table) may have come from
    ``${env:...}``, a secret."""
    if isinstance(value, bool | int | float):
        return repr(value)
    kinds = {str: "a string", list: "an array", dict: "a table"}
    return next((k for t, k in kinds.items() if isinstance(value, t)), type(value).__name__)


def _scalar_str(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(f"{where}: must be a string, number or boolean")
