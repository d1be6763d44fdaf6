"""Per-batch figures of the streaming jobs, as Prometheus metrics and JSON log lines.

:func:`install_metrics` (called by ``pipelines.bronze.run`` and ``pipelines.silver.run``)
registers one :class:`MetricsListener` (a ``StreamingQueryListener``) per Spark session and,
when ``metrics.prometheus_port`` > 0, serves :data:`REGISTRY` (``http://<host>:<port>/metrics``)
on the job's own port (:func:`serve_metrics`): bronze on ``prometheus_port``, silver on
``prometheus_port + 1``, so the two drivers of the streaming deployment, on one worker with one
configuration, each have an endpoint. Every query progress is also logged as
one JSON line on the ``pipelines.metrics`` logger (INFO), e.g.::

    {"event": "batch", "query": "silver_shop_orders", "batch_id": 3, "records_in": 120,
     "decoded": {"shop_v1_order_6b2c0c80": 118}, "quarantined": {"UNKNOWN_SCHEMA": 2},
     "duration_seconds": 2.4, "input_rows_per_second": 50.0, "processed_rows_per_second": 49.8,
     "lag_records": {"shop.orders": 0}, "files_outstanding": null,
     "phases_seconds": {"addBatch": 2.2, "latestOffset": 0.05, ...},
     "steps_seconds": {"frame": 0.3, "resolve": 0.0, ..., "write": 1.1}}

``phases_seconds`` is Spark's split of the batch's time (its progress's ``durationMs``);
``steps_seconds``, silver's only, splits the ``foreachBatch`` (``addBatch``) by step of
``pipelines.silver.batch.SilverBatch``.

Decoded and quarantined counts come from silver itself: ``SilverBatch`` calls the hook made by
:func:`silver_batch_hook` at the end of each micro-batch (the listener sees only Spark's
figures); bronze's router says which tables a batch wrote (:func:`bronze_batch_hook`, the
record's ``tables``). Every batch with records is also one short line for people
(:func:`pipelines.progress.report_batch`): bronze's from its progress, silver's from the hook,
when the batch ends. Metric names (documented with examples in docs/metrics.md); ``query`` is the
streaming query's name (``protolake-bronze-per_topic``/``protolake-bronze-single``,
``silver_<bronze table>``):

=============================================  =========  ==================================
name                                           type       labels
=============================================  =========  ==================================
protolake_batch_records_total                  counter    query (records in, numInputRows)
protolake_batches_total                        counter    query
protolake_batch_duration_seconds               histogram  query (trigger execution time)
protolake_input_rows_per_second                gauge      query
protolake_processed_rows_per_second            gauge      query
protolake_kafka_lag_records                    gauge      query, topic (latest - end offset)
protolake_delta_files_outstanding              gauge      query (Delta source backlog)
protolake_last_batch_id                        gauge      query
protolake_last_batch_timestamp_seconds         gauge      query (Unix time of the progress)
protolake_silver_decoded_total                 counter    query, table
protolake_silver_quarantined_total             counter    query, reason
protolake_query_terminated_total               counter    query, outcome (ok | failed)
=============================================  =========  ==================================

Metrics never fail a batch: an exception while recording is logged and swallowed.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from pipelines.log_names import METRICS_LOGGER
from pipelines.progress import report_batch, stage_of
from pipelines.settings import ProtolakeConfig

log = logging.getLogger(METRICS_LOGGER)

REGISTRY = CollectorRegistry()

BATCH_RECORDS = Counter(
    "protolake_batch_records", "Records read by a micro-batch", ["query"], registry=REGISTRY
)
BATCHES = Counter("protolake_batches", "Micro-batches completed", ["query"], registry=REGISTRY)
BATCH_DURATION = Histogram(
    "protolake_batch_duration_seconds",
    "Trigger execution time of a micro-batch",
    ["query"],
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
INPUT_RATE = Gauge(
    "protolake_input_rows_per_second", "Input rate of the last batch", ["query"], registry=REGISTRY
)
PROCESSED_RATE = Gauge(
    "protolake_processed_rows_per_second",
    "Processing rate of the last batch",
    ["query"],
    registry=REGISTRY,
)
KAFKA_LAG = Gauge(
    "protolake_kafka_lag_records",
    "Kafka records not yet read (latest offset - end offset of the last batch), per topic",
    ["query", "topic"],
    registry=REGISTRY,
)
FILES_OUTSTANDING = Gauge(
    "protolake_delta_files_outstanding",
    "Files of the Delta source not yet read after the last batch",
    ["query"],
    registry=REGISTRY,
)
LAST_BATCH_ID = Gauge(
    "protolake_last_batch_id", "Id of the last completed batch", ["query"], registry=REGISTRY
)
LAST_BATCH_TIME = Gauge(
    "protolake_last_batch_timestamp_seconds",
    "Unix time of the last progress report",
    ["query"],
    registry=REGISTRY,
)
SILVER_DECODED = Counter(
    "protolake_silver_decoded",
    "Records written to a silver table",
    ["query", "table"],
    registry=REGISTRY,
)
SILVER_QUARANTINED = Counter(
    "protolake_silver_quarantined",
    "Records sent to quarantine, by reason code",
    ["query", "reason"],
    registry=REGISTRY,
)
TERMINATED = Counter(
    "protolake_query_terminated",
    "Streaming queries that ended, by outcome",
    ["query", "outcome"],
    registry=REGISTRY,
)

_lock = threading.Lock()
_batch_stats: dict[tuple[str, int], dict[str, Any]] = {}  # (query, batch) -> the job's figures
_MAX_PENDING = 1000
_names: dict[str, str] = {}  # query id -> name (terminated events carry no name)
_installed: set[int] = set()  # id() of JVM sessions that have the listener
_servers: dict[int, Any] = {}  # port -> server


def silver_batch_hook(query_name: str) -> Callable[[Any], None]:
    """A ``SilverBatch.on_batch`` callback: counts decoded/quarantined rows of each batch."""

    def on_batch(stats: Any) -> None:
        try:
            for table, n in stats.silver.items():
                SILVER_DECODED.labels(query_name, table).inc(n)
            for reason, n in stats.quarantined.items():
                SILVER_QUARANTINED.labels(query_name, reason).inc(n)
            with _lock:
                if len(_batch_stats) >= _MAX_PENDING:  # no listener consuming them
                    _batch_stats.pop(next(iter(_batch_stats)))
                _batch_stats[(query_name, int(stats.batch_id))] = {
                    "records": int(stats.records),
                    "decoded": dict(stats.silver),
                    "quarantined": dict(stats.quarantined),
                    "steps_seconds": dict(stats.steps),
                }
            # said here, in the batch's own thread: in order with the job's other lines
            report_batch(
                {
                    "query": query_name,
                    "batch_id": int(stats.batch_id),
                    "records_in": int(stats.records),
                    "decoded": dict(stats.silver),
                    "quarantined": dict(stats.quarantined),
                    "duration_seconds": float(stats.seconds),
                }
            )
        except Exception:  # noqa: BLE001 - metrics never fail a batch
            log.exception("metrics: could not record silver batch of %s", query_name)

    return on_batch


def bronze_batch_hook(query_name: str) -> Callable[[int, list[str]], None]:
    """A ``TopicRouter.on_batch`` callback: the tables each bronze batch appended to."""

    def on_batch(batch_id: int, tables: list[str]) -> None:
        with _lock:
            if len(_batch_stats) >= _MAX_PENDING:  # no listener consuming them
                _batch_stats.pop(next(iter(_batch_stats)))
            _batch_stats[(query_name, int(batch_id))] = {"tables": sorted(tables)}

    return on_batch


def kafka_lag(source: Mapping[str, Any]) -> dict[str, int] | None:
    """Per topic, latest offset - end offset of a Kafka source progress (None: not Kafka).

    A partition missing from the end offsets (discovered after the batch was planned) has no
    known position and counts 0 until the next batch covers it.
    """
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    if end is None or latest is None:
        return None
    lag: dict[str, int] = {}
    for topic, parts in latest.items():
        if not isinstance(parts, Mapping):
            return None
        done: Mapping[str, Any] = end.get(topic) or {}
        total = 0
        for p, off in parts.items():
            if int(off) >= 0:  # -1/-2 mean latest/earliest, not offsets
                total += max(0, int(off) - int(done.get(p, off)))
        lag[topic] = total
    return lag


def _offsets(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping) or not value:
        return None
    # Delta source offsets are {"sourceVersion": 1, "reservoirId": ...}: no per-topic maps
    if not all(isinstance(v, Mapping) for v in value.values()):
        return None
    return dict(value)


def record_progress(progress: Mapping[str, Any]) -> dict[str, Any]:
    """Update the metrics from one query progress (its JSON as a dict); return the log record."""
    query = str(progress.get("name") or progress.get("id") or "unnamed")
    batch_id = int(progress.get("batchId", -1))
    records = int(progress.get("numInputRows") or 0)
    duration = float((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1000.0
    in_rate = float(progress.get("inputRowsPerSecond") or 0.0)
    out_rate = float(progress.get("processedRowsPerSecond") or 0.0)
    with _lock:
        silver = _batch_stats.pop((query, batch_id), None)
    if silver is not None:
        # A silver batch reads its bronze rows once per pass unless silver.cache_bronze is on,
        # and Spark's numInputRows counts every read: the batch's own count is the exact one.
        # (Bronze's entries hold only its tables.)
        spark_rows, records = records, int(silver.pop("records", records))
        if spark_rows > 0 and records != spark_rows:
            in_rate *= records / spark_rows
            out_rate *= records / spark_rows
    BATCH_RECORDS.labels(query).inc(records)
    BATCHES.labels(query).inc()
    BATCH_DURATION.labels(query).observe(duration)
    INPUT_RATE.labels(query).set(in_rate)
    PROCESSED_RATE.labels(query).set(out_rate)
    LAST_BATCH_ID.labels(query).set(batch_id)
    ts = _unix_time(progress.get("timestamp"))
    if ts is not None:
        LAST_BATCH_TIME.labels(query).set(ts)
    lag: dict[str, int] | None = None
    files: int | None = None
    for source in progress.get("sources") or []:
        topic_lag = kafka_lag(source)
        if topic_lag is not None:
            lag = {**(lag or {}), **topic_lag}
        outstanding = (source.get("metrics") or {}).get("numFilesOutstanding")
        if outstanding is not None:
            files = (files or 0) + int(outstanding)
    for topic, n in (lag or {}).items():
        KAFKA_LAG.labels(query, topic).set(n)
    if files is not None:
        FILES_OUTSTANDING.labels(query).set(files)
    record: dict[str, Any] = {
        "event": "batch",
        "query": query,
        "batch_id": batch_id,
        "records_in": records,
        "duration_seconds": round(duration, 3),
        "input_rows_per_second": round(in_rate, 3),
        "processed_rows_per_second": round(out_rate, 3),
        "lag_records": lag,
        "files_outstanding": files,
        "phases_seconds": {
            str(k): round(float(v) / 1000.0, 3)
            for k, v in (progress.get("durationMs") or {}).items()
        },
    }
    if silver is not None:
        record.update(silver)
    return record


def _unix_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _listener_base() -> type:
    from pyspark.sql.streaming import StreamingQueryListener

    return StreamingQueryListener


@functools.cache
def _json_progress_bridge() -> type:
    """PySpark's bridge from the JVM's listener bus to a Python listener, except that each
    progress event is read as its JSON, in one JVM call.

    PySpark's own bridge copies a progress field by field (dozens of JVM calls), and the
    iteration of each JVM map it copies ends with a Java exception that PySpark classifies
    through fourteen class look-ups, each a search of every jar: tens of milliseconds of the
    driver per event, and there is an event per micro-batch of every query. The JSON is what
    Spark Connect sends its listeners, read with the same ``StreamingQueryProgress.fromJson``.
    A progress whose JSON that function cannot read (Spark leaves a source's rates out when
    they are not finite) is copied field by field, as PySpark does.
    """
    from pyspark.sql.streaming.listener import (
        JStreamingQueryListener,
        QueryProgressEvent,
        StreamingQueryProgress,
    )

    class JsonProgressBridge(JStreamingQueryListener):  # type: ignore[misc]
        def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 - Spark's callback names
            try:
                progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
                event = QueryProgressEvent(progress)
            except Exception:  # noqa: BLE001 - e.g. a source's rate left out as NaN
                log.warning("metrics: progress JSON not readable, copied field by field")
                event = QueryProgressEvent.fromJObject(jevent)
            self.pylistener.onQueryProgress(event)

    return JsonProgressBridge


class MetricsListener(_listener_base()):  # type: ignore[misc]
    """Feeds :func:`record_progress` and logs one JSON line per batch and per query end."""

    @property
    def _jlistener(self) -> Any:
        """The JVM's side of this listener (what ``spark.streams.addListener`` registers):
        PySpark's, with progress events read as JSON (:func:`_json_progress_bridge`)."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(
                _json_progress_bridge()(self)
            )
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's callback names
        with _lock:
            _names[str(event.id)] = str(event.name or event.id)
        log.info(json.dumps({"event": "started", "query": event.name, "id": str(event.id)}))

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        try:
            record = record_progress(json.loads(event.progress.json))
            log.info(json.dumps(record, sort_keys=True))
            if stage_of(record["query"]) != "silver":  # silver's batches say it themselves
                report_batch(record)
        except Exception:  # noqa: BLE001 - metrics never fail a query
            log.exception("metrics: could not record a query progress")

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        with _lock:
            name = _names.pop(str(event.id), str(event.id))
        outcome = "failed" if event.exception else "ok"
        TERMINATED.labels(name, outcome).inc()
        log.info(
            json.dumps(
                {
                    "event": "terminated",
                    "query": name,
                    "outcome": outcome,
                    "error": _first_line(event.exception),
                }
            )
        )


#: each job's endpoint: ``metrics.prometheus_port`` plus its offset
JOB_PORT_OFFSETS = {"bronze": 0, "silver": 1}


class MetricsPortError(RuntimeError):
    """The port of a job's metrics endpoint is taken; the message names it and the setting."""


def metrics_port(cfg: ProtolakeConfig, job: str) -> int:
    """The port of ``job``'s endpoint (0: none): ``metrics.prometheus_port`` plus the job's
    offset (:data:`JOB_PORT_OFFSETS`)."""
    base = cfg.metrics.prometheus_port
    return base + JOB_PORT_OFFSETS[job] if base > 0 else 0


def serve_metrics(cfg: ProtolakeConfig, job: str) -> int:
    """Serve :data:`REGISTRY` on ``job``'s port (:func:`metrics_port`), once per process and
    port; returns the port (0: no endpoint configured).

    Raises:
        MetricsPortError: the port is taken (by another process, or not ours to bind).
    """
    port = metrics_port(cfg, job)
    with _lock:
        if port > 0 and port not in _servers:
            addr = cfg.metrics.prometheus_address
            try:
                _servers[port] = start_http_server(port, addr=addr, registry=REGISTRY)
            except OSError as exc:
                raise MetricsPortError(
                    f"metrics: {job}'s Prometheus endpoint cannot listen on {addr}:{port} "
                    f"(metrics.prometheus_port + {JOB_PORT_OFFSETS[job]}): {exc.strerror or exc}"
                ) from None
            log.info("metrics: %s's Prometheus endpoint on %s:%d", job, addr, port)
    return port


def install_metrics(spark: Any, cfg: ProtolakeConfig, job: str) -> MetricsListener | None:
    """Register the listener on ``spark`` (once per session) and serve ``job``'s endpoint
    (:func:`serve_metrics`).

    Returns the new listener, or None when this session already has one.
    """
    serve_metrics(cfg, job)
    with _lock:
        key = id(spark._jsparkSession)
        if key in _installed:
            return None
        _installed.add(key)
    listener = MetricsListener()
    spark.streams.addListener(listener)
    return listener


def _first_line(text: str | None) -> str | None:
    """The first line of an exception text (at most 500 characters), None when there is none."""
    lines = (text or "").splitlines()
    return lines[0][:500] if lines else None
