"""What protolake's DAG files share: the spark-submit operator, settings, and readers of the
lakehouse's own files (Delta logs, streaming checkpoints) that need neither Spark nor a JVM.

Contract:

- Importing this module imports only the standard library and Airflow (the scheduler parses
  DAG files often). ``pipelines.*`` (which may pull in pyspark) is imported inside
  :meth:`ProtolakeSparkSubmitOperator.execute` and the other run-time functions, never here.
- Settings come from the environment of the Airflow worker, read when a task runs:
  ``PROTOLAKE_CONFIG`` (the TOML file; required), ``SPARK_HOME`` (a Spark installation; else
  pyspark's own spark-submit from Airflow's environment), ``PYSPARK_PYTHON`` (the Python of the
  Spark driver and executors; default: Airflow's interpreter with a local master, the
  cluster's own otherwise), and the Airflow connections ``spark_default`` (the master) and
  ``protolake_registry`` (optional; exported to the job as ``PROTOLAKE_REGISTRY_URL``,
  ``PROTOLAKE_REGISTRY_AUTH`` (``login:password``) and ``PROTOLAKE_REGISTRY_TOKEN``, which the
  TOML file references as ``${env:...}``). Secrets are never written to a DAG file or a log.
- The Delta-log readers understand local (or mounted) paths and ``file:`` URIs; for another
  file system they return None / empty results and say so in the task log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

log = logging.getLogger(__name__)

CONFIG_ENV = "PROTOLAKE_CONFIG"
REGISTRY_CONN_ID = "protolake_registry"
SPARK_CONN_ID = "spark_default"
SILVER_ALIAS = "protolake-silver"
STREAM_STATE_ENV = "PROTOLAKE_STREAM_STATE_DIR"
STREAM_JOBS = ("bronze", "silver")


class ProtolakeSetupError(RuntimeError):
    """The worker's environment is not set up for protolake (the message says what to do)."""


# --- settings ------------------------------------------------------------------------------


def config_path(environ: Mapping[str, str] | None = None) -> str:
    """``$PROTOLAKE_CONFIG`` as an absolute path; the file must exist.

    Raises:
        ProtolakeSetupError: the variable is unset or the file is missing.
    """
    env = os.environ if environ is None else environ
    raw = env.get(CONFIG_ENV, "")
    if not raw:
        raise ProtolakeSetupError(
            f"{CONFIG_ENV} is not set: export it in the Airflow worker's environment "
            "(the path of protolake's TOML configuration)"
        )
    path = Path(raw).expanduser().resolve()
    if not path.is_file():
        raise ProtolakeSetupError(f"{CONFIG_ENV}={raw}: no such file")
    return str(path)


def env_int(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """An integer from the environment (parse time is fine: stdlib only).

    Raises:
        ValueError: the value is not an integer.
    """
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}: must be an integer, got {raw!r}") from None


def spark_bin_dir(environ: Mapping[str, str] | None = None) -> str:
    """The folder holding spark-submit: ``$SPARK_HOME/bin``, else pyspark's own ``bin``.

    Raises:
        ProtolakeSetupError: neither has a spark-submit.
    """
    import importlib.util

    env = os.environ if environ is None else environ
    home = env.get("SPARK_HOME", "")
    if home:
        folder = Path(home) / "bin"
    else:
        # find_spec locates the package without importing it (pyspark loads slowly)
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise ProtolakeSetupError(
                "spark-submit: SPARK_HOME is unset and pyspark is not installed next to Airflow"
            )
        folder = Path(spec.origin).parent / "bin"
    if not (folder / "spark-submit").is_file():
        raise ProtolakeSetupError(f"spark-submit not found in {folder}")
    return str(folder)


def registry_env() -> dict[str, str]:
    """``PROTOLAKE_REGISTRY_*`` variables from the ``protolake_registry`` connection (if any).

    The connection's host (with schema and port) gives the URL, login and password the basic
    auth, the ``bearer_token`` extra a token. No connection: nothing (the TOML then holds the
    URL, or reads the variables from the worker's own environment).
    """
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(REGISTRY_CONN_ID)
    except Exception as exc:  # AirflowNotFoundException's import path moves between versions
        if "isn't defined" in str(exc) or "not found" in str(exc).lower():
            log.info(
                "no %s connection: registry settings come from the TOML file", REGISTRY_CONN_ID
            )
            return {}
        raise
    out: dict[str, str] = {}
    host = conn.host or ""
    if host:
        if "://" not in host:
            host = f"{conn.schema or 'http'}://{host}"
        out["PROTOLAKE_REGISTRY_URL"] = f"{host}:{conn.port}" if conn.port else host
    if conn.login:
        out["PROTOLAKE_REGISTRY_AUTH"] = f"{conn.login}:{conn.password or ''}"
    token = (conn.extra_dejson or {}).get("bearer_token")
    if token:
        out["PROTOLAKE_REGISTRY_TOKEN"] = str(token)
    return out


# --- the operator --------------------------------------------------------------------------


class ProtolakeSparkSubmitOperator(SparkSubmitOperator):
    """``spark-submit pipelines/jobs/run.py <subcommand> --config $PROTOLAKE_CONFIG [args]``.

    Everything that depends on the worker (the config path, the py-files zip, the jars, which
    spark-submit, the Python) is settled in :meth:`execute`, not when the DAG file is parsed.
    With a local master the job gets ``pipelines.spark.LOCAL_CONF`` and Airflow's Python; with
    a cluster master it gets ``PYSPARK_PYTHON`` if the worker sets it, else the cluster's.
    Every job also gets ``spark.redaction.regex = pipelines.spark.REDACTION_REGEX``: on
    Kubernetes and YARN the provider turns the job's environment (``PROTOLAKE_REGISTRY_AUTH``
    ...) into ``spark.kubernetes.driverEnv.*`` / ``spark.yarn.appMasterEnv.*`` settings, which
    Spark's default regex would show in its UI and event log.
    ``conf`` given to the operator is applied last.

    ``publish_silver`` (silver only): after the job, an asset event
    ``protolake://silver/<table>`` is added to the ``protolake-silver`` asset alias for every
    silver table whose Delta version changed during the run.
    """

    ui_color = "#ffd8a8"

    def __init__(
        self,
        *,
        subcommand: str,
        subcommand_args: Sequence[str] = (),
        publish_silver: bool = False,
        refuse_when_streaming: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("conn_id", SPARK_CONN_ID)
        kwargs.setdefault("name", f"protolake-{subcommand}")
        super().__init__(**kwargs)
        self.subcommand = subcommand
        self.subcommand_args = list(subcommand_args)
        self.publish_silver = publish_silver
        self.refuse_when_streaming = refuse_when_streaming

    def execute(self, context: Any) -> None:
        from pipelines.jobs import RUN_SCRIPT, build_py_files
        from pipelines.spark import LOCAL_CONF, REDACTION_REGEX, find_spark_jars, is_local_master

        config = config_path()
        if self.refuse_when_streaming:
            running = running_streams()
            if running:
                raise ProtolakeSetupError(
                    f"continuous streams are running ({', '.join(running)}; see the "
                    "protolake_streaming DAG): an available-now run would share their "
                    "checkpoints. Stop them or pause this DAG."
                )
        master = str(self._get_hook()._connection["master"])  # the connection's master URL
        local = is_local_master(master)
        python = os.environ.get("PYSPARK_PYTHON") or (sys.executable if local else "")
        conf: dict[str, Any] = dict(LOCAL_CONF) if local else {}
        conf["spark.redaction.regex"] = REDACTION_REGEX
        if python:
            conf["spark.pyspark.python"] = python
            conf["spark.pyspark.driver.python"] = python
        conf.update(self.conf or {})
        bin_dir = spark_bin_dir()
        env: dict[str, Any] = {
            # the hook runs "spark-submit" from PATH: put the chosen one first
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "SPARK_HOME": str(Path(bin_dir).parent),
            **({"PYSPARK_PYTHON": python} if python else {}),
            **({"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")} if local else {}),
            **registry_env(),
            **(self.env_vars or {}),
        }
        self.application = str(RUN_SCRIPT)
        self.py_files = build_py_files()  # content-hashed: rebuilt only when the code changed
        self.jars = ",".join(find_spark_jars())
        self.conf = conf
        self.env_vars = env
        self.application_args = [self.subcommand, "--config", config, *self.subcommand_args]
        self._hook = None  # rebuilt by execute() from the settings above
        before = silver_versions(config) if self.publish_silver else {}
        super().execute(context)
        if self.publish_silver:
            self._publish(context, before, silver_versions(config))

    def _publish(self, context: Any, before: dict[str, int], after: dict[str, int]) -> None:
        from airflow.sdk import Asset, AssetAlias

        changed = sorted(t for t, v in after.items() if before.get(t) != v)
        events = context["outlet_events"][AssetAlias(SILVER_ALIAS)]
        for table in changed:
            events.add(
                Asset(f"protolake://silver/{table}"),
                extra={"table": table, "delta_version": after[table]},
            )
        self.log.info("silver tables changed in this run: %s", changed or "none")


# --- the lakehouse's files, read without Spark ---------------------------------------------


def local_path(path_or_uri: str) -> Path | None:
    """A local Path for a plain path or ``file:`` URI; None for other file systems."""
    if path_or_uri.startswith("file:"):
        return Path(re.sub(r"^file:(//)?", "", path_or_uri))
    if "://" in path_or_uri:
        return None
    return Path(path_or_uri)


def load_job_config(config: str) -> Any:
    """The configuration as the jobs see it (``${env:...}`` from the worker's environment and
    the ``protolake_registry`` connection)."""
    from pipelines.settings import load_config

    return load_config(config, env={**os.environ, **registry_env()})


def lakehouse_root(config: str) -> Path | None:
    """The lakehouse folder of a configuration file (None: not on a local file system)."""
    root = local_path(load_job_config(config).lakehouse_path)
    if root is None:
        log.warning("the lakehouse is not on a local file system: no Delta-log figures")
    return root


def delta_version(table: Path) -> int | None:
    """The latest committed version of a Delta table (None: not a Delta table)."""
    versions = [int(p.stem) for p in (table / "_delta_log").glob("*.json") if p.stem.isdigit()]
    return max(versions) if versions else None


def delta_tables(folder: Path) -> dict[str, Path]:
    """Delta tables directly under ``folder``, by name."""
    if not folder.is_dir():
        return {}
    return {p.name: p for p in sorted(folder.iterdir()) if (p / "_delta_log").is_dir()}


def silver_versions(config: str) -> dict[str, int]:
    """``{silver table: latest Delta version}`` of the configured lakehouse."""
    root = lakehouse_root(config)
    if root is None:
        return {}
    out = {}
    for name, path in delta_tables(root / "silver").items():
        version = delta_version(path)
        if version is not None:
            out[name] = version
    return out


def delta_row_count(
    table: Path, where: tuple[str, Callable[[Any], bool]] | None = None
) -> int | None:
    """Rows in the latest snapshot, from the ``numRecords`` statistics of the Delta log.

    Replays the last checkpoint (Parquet, read with pyarrow) and the JSON commits after it.
    With ``where = (column, keep)``, only the rows whose ``column`` value ``keep`` accepts: a
    file whose statistics say the column is null throughout counts ``keep(None)`` for every
    row without being opened; any other file's column is read (pyarrow) and tested value by
    value. None when a live file has no statistics (Delta then cannot tell without a scan
    either), or, with ``where``, when a file to read has a deletion vector or no such column
    (column mapping): Spark can count those, this reader does not try.
    """
    files = _live_files(table)
    if files is None:
        return None
    total = 0
    for path, add in files.items():
        stats = json.loads(add.get("stats") or "{}")
        if stats.get("numRecords") is None:
            return None
        records = int(stats["numRecords"])
        deletion_vector = add.get("deletionVector")
        live = (
            records - int(deletion_vector.get("cardinality") or 0) if deletion_vector else records
        )
        if where is None:
            total += live
            continue
        column, keep = where
        if (stats.get("nullCount") or {}).get(column) == records:
            total += live if keep(None) else 0
            continue
        values = None if deletion_vector else _column_values(table, path, column)
        if values is None:
            return None
        total += sum(1 for value in values if keep(value))
    return total


def _live_files(table: Path) -> dict[str, dict[str, Any]] | None:
    """The add actions of the latest snapshot, by file path (None: not a Delta table)."""
    logdir = table / "_delta_log"
    files: dict[str, dict[str, Any]] = {}
    start = 0
    last = logdir / "_last_checkpoint"
    if last.is_file():
        meta = json.loads(last.read_text())
        start = int(meta["version"]) + 1
        parts = sorted(logdir.glob(f"{int(meta['version']):020d}.checkpoint*.parquet"))
        import pyarrow.parquet as pq

        for part in parts:
            rows = pq.read_table(part, columns=["add"]).column("add").to_pylist()
            for add in rows:
                if add:
                    files[add["path"]] = add
    latest = delta_version(table)
    if latest is None:
        return None
    for version in range(start, latest + 1):
        commit = logdir / f"{version:020d}.json"
        for line in commit.read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                files[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    return files


def _column_values(table: Path, path: str, column: str) -> list[Any] | None:
    """One column of a table's data file (None: not local, or no such column)."""
    import pyarrow.parquet as pq

    # the log holds a URI: relative to the table, or absolute with a scheme (file:, s3:, ...)
    if urllib.parse.urlsplit(path).scheme:
        file = local_path(urllib.parse.unquote(path))
    else:
        file = table / urllib.parse.unquote(path)
    if file is None or column not in pq.read_schema(file).names:
        return None
    return list(pq.read_table(file, columns=[column]).column(column).to_pylist())


def lakehouse_counts(config: str) -> dict[str, dict[str, int | None]]:
    """Rows per table of bronze and silver, and records still quarantined, from the Delta logs.

    Quarantine counts as ``protolake status`` and the invariant do: a row replayed into silver
    stays in the quarantine table (its raw bytes are kept) but is counted in silver only
    (``pipelines.quarantine_state``).
    """
    from pipelines.quarantine_state import OUTCOME_COLUMN, counts_as_quarantined

    root = lakehouse_root(config)
    if root is None:
        return {}
    counts = {
        layer: {name: delta_row_count(path) for name, path in delta_tables(root / layer).items()}
        for layer in ("bronze", "silver")
    }
    counts["quarantine"] = {
        name: delta_row_count(path, where=(OUTCOME_COLUMN, counts_as_quarantined))
        for name, path in delta_tables(root / "quarantine").items()
    }
    return counts


def format_counts(counts: Mapping[str, Mapping[str, int | None]]) -> str:
    """The counts as a small text table, with totals and the bronze = silver + quarantine sum
    (quarantine: the records still quarantined, see :func:`lakehouse_counts`)."""
    lines = []
    totals: dict[str, int] = {}
    for layer, tables in counts.items():
        total = 0
        for name, n in tables.items():
            lines.append(f"{layer:<10} {name:<50} {'?' if n is None else n:>10}")
            total += n or 0
        totals[layer] = total
        lines.append(f"{layer:<10} {'(total)':<50} {total:>10}")
    b, s, q = (totals.get(k, 0) for k in ("bronze", "silver", "quarantine"))
    verdict = "matches" if b == s + q else "DIFFERS (bronze != silver + quarantine)"
    lines.append(f"bronze {b} vs silver {s} + quarantine {q}: {verdict}")
    return "\n".join(lines)


# --- continuous streams: pid files, checkpoints, lag -----------------------------------------


def stream_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the streams' pid files and logs live (on the worker that starts them):
    ``$PROTOLAKE_STREAM_STATE_DIR``, else ``$AIRFLOW_HOME/protolake/streams``."""
    env = os.environ if environ is None else environ
    raw = env.get(STREAM_STATE_ENV)
    if raw:
        return Path(raw)
    home = env.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "protolake" / "streams"


def stream_pid(job: str, state_dir: Path | None = None) -> int | None:
    """The pid of the live ``job`` stream started by the streaming DAG (None: not running).

    A pid counts only if the process exists and its command line is still a protolake
    spark-submit of that job (a recycled pid is not mistaken for the stream).
    """
    pid_file = (state_dir or stream_state_dir()) / f"{job}.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in cmdline]
    if any(a.endswith("run.py") for a in args) and job in args:
        return pid
    return None


def running_streams(state_dir: Path | None = None) -> list[str]:
    """The continuous jobs that are running now."""
    return [job for job in STREAM_JOBS if stream_pid(job, state_dir) is not None]


@dataclass
class CheckpointProgress:
    """What a streaming checkpoint says: the last batch planned and committed, and when."""

    checkpoint: str
    last_offsets_batch: int | None = None
    last_commit_batch: int | None = None
    last_commit_age_seconds: float | None = None
    offsets: dict[str, Any] | None = None  # the source offsets of the last planned batch

    @property
    def in_flight(self) -> bool:
        """A batch was planned and not committed (running now, or died mid-batch)."""
        return self.last_offsets_batch is not None and self.last_offsets_batch != (
            self.last_commit_batch
        )


def read_checkpoint(checkpoint: Path, now: float | None = None) -> CheckpointProgress:
    """Read ``offsets/<n>`` and ``commits/<n>`` of a Structured Streaming checkpoint.

    The offset log's file holds a version line, a metadata JSON line, then one JSON line per
    source (Spark's ``OffsetSeqLog``).
    """
    out = CheckpointProgress(str(checkpoint))
    offsets = _numbered(checkpoint / "offsets")
    commits = _numbered(checkpoint / "commits")
    if offsets:
        out.last_offsets_batch = offsets[-1][0]
        lines = offsets[-1][1].read_text().splitlines()
        sources = [json.loads(x) for x in lines[2:] if x.strip() and x.strip() != "-"]
        out.offsets = {"sources": sources}
    if commits:
        out.last_commit_batch = commits[-1][0]
        out.last_commit_age_seconds = (now or time.time()) - commits[-1][1].stat().st_mtime
    return out


def _numbered(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    return sorted((int(p.name), p) for p in folder.iterdir() if p.name.isdigit())


def bronze_lag(progress: CheckpointProgress, bootstrap: str, options: Mapping[str, str]) -> int:
    """Records in Kafka beyond the bronze checkpoint's last planned offsets.

    Partitions the checkpoint does not know yet count from their start offset.
    """
    from confluent_kafka import Consumer, TopicPartition

    planned: dict[tuple[str, int], int] = {}
    for source in (progress.offsets or {}).get("sources", []):
        for topic, parts in source.items():
            for part, offset in parts.items():
                planned[(topic, int(part))] = int(offset)
    topics = sorted({t for t, _ in planned})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "protolake-health", **options})
    try:
        meta = consumer.list_topics(timeout=10)
        lag = 0
        for topic in topics:
            info = meta.topics.get(topic)
            if info is None:
                continue
            for part in info.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
                lag += max(0, high - max(low, planned.get((topic, part), low)))
        return lag
    finally:
        consumer.close()


def silver_lag(progress: CheckpointProgress, bronze_table: Path) -> int | None:
    """Delta versions of a bronze table beyond the silver checkpoint's last planned version."""
    latest = delta_version(bronze_table)
    if latest is None:
        return None
    sources = (progress.offsets or {}).get("sources", [])
    if not sources:
        return latest + 1
    planned = int(sources[0].get("reservoirVersion", -1))
    # index -1: version reservoirVersion is the next one to read; otherwise the offset points
    # inside that version, which counts as read once its last file was (the usual end state)
    unread_from = planned if int(sources[0].get("index", -1)) == -1 else planned + 1
    return max(0, latest - unread_from + 1)


@dataclass
class StreamHealth:
    """The verdict on one continuous job (see :func:`judge_stream`)."""

    job: str
    pid: int | None
    verdict: str  # "healthy" | "dead" | "stale"
    reason: str
    lag: int | None = None
    last_commit_age_seconds: float | None = None


def judge_stream(
    job: str,
    pid: int | None,
    parts: Sequence[tuple[str, CheckpointProgress | None, int | None]],
    stale_after_seconds: float,
    running_seconds: float | None = None,
) -> StreamHealth:
    """Healthy, dead or stale, from the process and its checkpoints' progress.

    ``parts`` holds one ``(name, checkpoint progress or None, lag or None)`` per query of the
    job (bronze: one; silver: one per bronze table). ``running_seconds``: how long the process
    has been up.

    - dead: no live process (no pid file, or the pid is gone or is another program);
    - stale: alive for more than ``stale_after_seconds``, and some query has work waiting
      (lag > 0) but committed no batch for ``stale_after_seconds`` (a stuck driver, a hung
      source, or a bronze table that appeared after the silver stream started and that it
      therefore does not read). An idle query with no lag commits nothing and is healthy
      however old its last batch is. An unknown lag (not measurable) never makes it stale;
    - healthy otherwise.
    """
    lags = [lag for _, _, lag in parts if lag is not None]
    total_lag = sum(lags) if lags else None
    ages = [p.last_commit_age_seconds for _, p, _ in parts if p and p.last_commit_age_seconds]
    newest = min(ages) if ages else None
    if pid is None:
        return StreamHealth(job, None, "dead", "no live process", total_lag, newest)
    young = running_seconds is not None and running_seconds < stale_after_seconds
    if not young:
        for name, progress, lag in parts:
            if not lag:
                continue
            age = progress.last_commit_age_seconds if progress else None
            if age is None or age > stale_after_seconds:
                when = "never" if age is None else f"{age:.0f} s ago"
                return StreamHealth(
                    job, pid, "stale", f"{name}: lag {lag}, last batch {when}", total_lag, newest
                )
    return StreamHealth(job, pid, "healthy", f"lag {total_lag}", total_lag, newest)


def stream_parts(job: str, config: str) -> list[tuple[str, CheckpointProgress | None, int | None]]:
    """The queries of a continuous job, each with its checkpoint's progress and its lag.

    Checkpoint locations follow ``pipelines.bronze.bronze_checkpoint`` and
    ``pipelines.silver.job.silver_checkpoint`` (not imported: they load pyspark). A lag that
    cannot be measured (Kafka unreachable with the available options) is None, logged.
    """
    cfg = load_job_config(config)
    root = local_path(cfg.lakehouse_path)
    if root is None:
        log.warning("the lakehouse is not on a local file system: liveness only")
        return []
    if job == "bronze":
        name = "per_topic" if cfg.bronze.table_mode == "per_topic" else cfg.bronze.single_table
        checkpoint = root / "_checkpoints" / "bronze" / name
        progress = read_checkpoint(checkpoint) if checkpoint.is_dir() else None
        lag: int | None = None
        if progress is not None:
            try:
                lag = bronze_lag(progress, cfg.kafka.bootstrap_servers, kafka_client_options(cfg))
            except Exception as exc:  # a health probe must not fail the check
                log.warning("bronze lag not measurable: %s", type(exc).__name__)
        return [(name, progress, lag)]
    parts: list[tuple[str, CheckpointProgress | None, int | None]] = []
    for name, table in delta_tables(root / "bronze").items():
        checkpoint = root / "_checkpoints" / "silver" / name
        progress = read_checkpoint(checkpoint) if checkpoint.is_dir() else None
        if progress is None:
            version = delta_version(table)
            parts.append((name, None, None if version is None else version + 1))
        else:
            parts.append((name, progress, silver_lag(progress, table)))
    return parts


def kafka_client_options(cfg: Any) -> dict[str, Any]:
    """The probe's librdkafka settings: :func:`pipelines.ops.common.kafka_client_conf` (the
    translation ``protolake status`` uses: SASL credentials from ``sasl.jaas.config``, SSL
    files, ...), without ``bootstrap.servers`` (passed on its own)."""
    from pipelines.ops.common import kafka_client_conf

    conf = kafka_client_conf(cfg)
    conf.pop("bootstrap.servers", None)
    return conf


class StreamDiedError(RuntimeError):
    """A stream this DAG started died since the previous check (it was started again)."""


START_WATCH_SECONDS = 15.0  # a bad configuration or a missing jar fails within seconds
LOG_TAIL_CHARS = 3000


def secret_values(config: str) -> list[str]:
    """The secrets the jobs see (longest first): every value ``ProtolakeConfig.redacted()``
    hides (with the password of a ``user:pass`` and of a JAAS config on its own), and the
    ``protolake_registry`` connection's credentials."""
    import dataclasses

    from pipelines.ops.common import kafka_client_conf

    cfg = load_job_config(config)
    found: set[str] = set()

    def walk(plain: Any, shown: Any) -> None:
        if isinstance(plain, Mapping):
            for key, value in plain.items():
                walk(value, shown.get(key) if isinstance(shown, Mapping) else None)
        elif isinstance(plain, list | tuple):
            shown_list = shown if isinstance(shown, list | tuple) else []
            for i, value in enumerate(plain):
                walk(value, shown_list[i] if i < len(shown_list) else None)
        elif isinstance(plain, str) and plain and plain != shown:
            if shown == "***":
                found.add(plain)
            else:  # a URL's user:password@
                found.update(m for m in re.findall(r"://([^/@]+)@", plain))

    walk(dataclasses.asdict(cfg), cfg.redacted())
    found.update(v for k, v in registry_env().items() if k != "PROTOLAKE_REGISTRY_URL" and v)
    found.update(str(v) for k, v in kafka_client_conf(cfg).items() if "password" in k and v)
    found.update(s.split(":", 1)[1] for s in list(found) if ":" in s)
    return sorted((s for s in found if s), key=len, reverse=True)


def stream_log_tail(log_path: Path, config: str, chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a stream's log, every value of :func:`secret_values` replaced by ``***``."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, log_path.stat().st_size - 65536))
            text = f.read().decode(errors="replace")
    except OSError:
        return f"(no log at {log_path})"
    for secret in secret_values(config):
        text = text.replace(secret, "***")
    # from a whole line on (a secret cut at the 64 KiB window's start stays out of the tail)
    return text[-chars:].split("\n", 1)[-1] if len(text) > chars else text


def stream_starts(state_dir: Path, job: str, since: float = 0.0) -> list[dict[str, Any]]:
    """The start history of ``job`` (``<state dir>/<job>.starts``, JSON lines), from ``since``."""
    try:
        lines = (state_dir / f"{job}.starts").read_text().splitlines()
    except FileNotFoundError:
        return []
    starts = [json.loads(x) for x in lines if x.strip()]
    return [x for x in starts if float(x.get("time", 0)) >= since]


def stop_stream(job: str, pid: int, grace_seconds: float = 60.0) -> None:
    """SIGTERM the stream's process group (the job stops its queries), SIGKILL after a grace."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        try:
            # reap it if it is our own child (else a zombie keeps the group "alive")
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
    log.warning("%s stream (pid %s) ignored SIGTERM for %s s: SIGKILL", job, pid, grace_seconds)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_stream(job: str, config: str, state_dir: Path | None = None) -> int:
    """Start ``job`` (processing-time trigger) detached, in its own session; return its pid.

    The command is :func:`pipelines.jobs.submit_command` (``spark-submit ... run.py <job>
    --config FILE --trigger processing-time``) against the ``spark_default`` master; output goes
    to ``<state dir>/<job>.log`` (appended), the pid to ``<state dir>/<job>.pid``, and one line
    per start to ``<state dir>/<job>.starts``. The process runs in the task's working directory
    (absolute, recorded in ``.starts``), where the configuration's relative paths
    (``lakehouse.path``, ...) resolve as they do for the health checks and for
    ``protolake_ingest``'s jobs. ``SPARK_LOCAL_IP=127.0.0.1`` only with a local master.

    Raises:
        ProtolakeSetupError: the process ended within :data:`START_WATCH_SECONDS` (the log's
            tail, secrets redacted, says why).
    """
    import subprocess

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from pipelines.jobs import submit_command
    from pipelines.spark import is_local_master

    folder = state_dir or stream_state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    master = str(SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection["master"])
    python = os.environ.get("PYSPARK_PYTHON") or None
    cmd = submit_command(job, config, master, args=["--trigger", "processing-time"], python=python)
    env = {**os.environ, **registry_env()}
    if is_local_master(master):  # a cluster's executors must reach the driver: no loopback
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    workdir = Path.cwd()
    log_path = folder / f"{job}.log"
    with log_path.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            start_new_session=True,  # outlives the task; its own group, stopped as one
        )
    (folder / f"{job}.pid").write_text(f"{proc.pid}\n")
    started = {"time": time.time(), "pid": proc.pid, "cwd": str(workdir)}
    history = [*stream_starts(folder, job, since=time.time() - 7 * 86400), started][-200:]
    (folder / f"{job}.starts").write_text("".join(json.dumps(x) + "\n" for x in history))
    time.sleep(START_WATCH_SECONDS)
    if proc.poll() is not None:
        tail = stream_log_tail(log_path, config)
        raise ProtolakeSetupError(f"{job} stream exited with {proc.returncode}:\n{tail}")
    log.info("%s stream started: pid %s, log %s", job, proc.pid, log_path)
    return proc.pid


def ensure_stream(job: str, stale_after_seconds: float) -> dict[str, Any]:
    """Judge the ``job`` stream and start or restart it as needed; return the verdict.

    Raises:
        StreamDiedError: the stream this DAG started (its pid file is there) died since the
            previous check. It is started again first; the error makes the crash, and a crash
            loop the first :data:`START_WATCH_SECONDS` cannot see, a failed task. The message
            has the end of its log (secrets redacted) and its starts of the last 24 hours.
            (To stop a stream on purpose, pause the DAG, stop it and delete its pid file.)
    """
    config = config_path()
    folder = stream_state_dir()
    pid = stream_pid(job, folder)
    pid_file = folder / f"{job}.pid"
    running = time.time() - pid_file.stat().st_mtime if pid is not None else None
    health = judge_stream(job, pid, stream_parts(job, config), stale_after_seconds, running)
    log.info("%s stream: %s (%s)", job, health.verdict, health.reason)
    died = ""
    if health.verdict == "dead" and pid_file.is_file():
        old = pid_file.read_text().strip()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pid_file.stat().st_mtime))
        died = (
            f"{job} stream (pid {old}, started {since}) died since the previous check; "
            f"end of {folder / f'{job}.log'}:\n{stream_log_tail(folder / f'{job}.log', config)}"
        )
    action, new_pid = "none", None
    if health.verdict == "stale" and health.pid is not None:
        stop_stream(job, health.pid)
        action = "restarted"
    elif health.verdict == "dead":
        action = "started"
    if action != "none":
        try:
            new_pid = start_stream(job, config, folder)
        except ProtolakeSetupError as exc:
            if died:
                raise StreamDiedError(f"{died}\n--- starting it again failed: {exc}") from exc
            raise
    if died:
        starts = len(stream_starts(folder, job, since=time.time() - 86400))
        raise StreamDiedError(
            f"{died}\n--- started again as pid {new_pid}; {starts} starts in the last 24 h"
        )
    return {
        "job": job,
        "verdict": health.verdict,
        "reason": health.reason,
        "lag": health.lag,
        "last_commit_age_seconds": health.last_commit_age_seconds,
        "action": action,
    }
