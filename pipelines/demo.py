"""``make demo``: produce the demo shop's stream, run every pipeline stage, print what landed.

Run as ``python -m pipelines.demo [options]`` or ``protolake demo [options]``. Steps:

1. Configuration: ``--config FILE`` (default: the embedded ``pipelines/demo.toml``), then the
   demo's overrides: ``PROTOLAKE_KAFKA_BOOTSTRAP`` / ``PROTOLAKE_REGISTRY_URL`` replace the
   broker and registry addresses, ``--lakehouse DIR`` the lakehouse root, and ``kafka.topics``
   becomes the demo's four topics under ``--topic-prefix`` (default ``demo.``).
2. The stack must be up: Kafka answers a metadata request and the registry ``GET /subjects``;
   otherwise one line per problem says to run ``infra/stack.sh up`` (exit 1).
3. The stream (:mod:`pipelines.demo_stream`) is produced only when the demo topics hold no
   record yet, so running the demo twice is safe: the second run produces nothing, the
   pipelines find nothing new (their checkpoints are in the lakehouse) and the summary is the
   same. ``--append`` produces another stream on top (the pipelines then take the new
   records only). What was produced is kept in ``<lakehouse>/_demo/streams.json``; the
   summary compares the lakehouse with it.
4. Bronze, then silver, with the available-now trigger, each only if its module exists (a
   missing stage is reported in one line, not an error).
5. The summary: every Delta table under the lakehouse with its row count, quarantine by
   reason (with what the stream makes expected), the invariant bronze = silver + quarantine
   (record by record, :func:`pipelines.quarantine.check_invariant`), the quality summary (every
   silver table: the default suite, plus the expectations ``demo.toml`` declares for three of
   the six message types) and the Data Docs path when quality exists, and an example query with
   its result.

Exit code 0 when every check that could run passed (Kafka's record count = bronze rows; the
invariant; silver and quarantine counts = what the stream predicts; every silver table has
quality results), 1 otherwise. ``--json``
prints the report as JSON instead of text (logs go to stderr either way).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import logging
import os
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.settings import ProtolakeConfig, parse_config
from pipelines.demo_stream import (
    DQ_QUANTITY,
    TOPIC_SUFFIXES,
    DemoStream,
    DemoStreamError,
    DemoStreamSummary,
    produce_demo_stream,
)
from pipelines.naming import bronze_table_of_topic

log = logging.getLogger(__name__)

DEMO_CONFIG = Path(__file__).resolve().with_name("demo.toml")
STREAMS_FILE = "_demo/streams.json"
ENV_BOOTSTRAP = "PROTOLAKE_KAFKA_BOOTSTRAP"
ENV_REGISTRY = "PROTOLAKE_REGISTRY_URL"
STACK_HINT = "start the local stack first: infra/stack.sh up  (or: make demo)"


class StackDownError(RuntimeError):
    """Kafka or the schema registry does not answer."""


@dataclass
class DemoOptions:
    """What the command line chooses (see :func:`add_parser`)."""

    config: str | None = None
    lakehouse: str | None = None
    topic_prefix: str = "demo."
    records: int = 3000
    seed: int = 7
    poison_every: int = 50
    append: bool = False


@dataclass
class DemoReport:
    """Everything the demo prints, as data (``--json`` prints :meth:`to_dict`)."""

    lakehouse: str
    topics: list[str]
    produced: DemoStreamSummary | None = None
    records_on_topics: int = 0
    expected: dict[str, Any] | None = None  # merged stream summaries, see _expected
    stages: dict[str, str] = field(default_factory=dict)
    tables: list[dict[str, Any]] = field(default_factory=list)
    bronze_rows: int | None = None
    silver_by_type: dict[str, int] | None = None
    quarantine_by_reason: dict[str, int] | None = None
    invariant: dict[str, Any] | None = None
    quality: list[dict[str, Any]] | None = None
    dq_failed_rows: int | None = None  # DQ_FAILED rows in quarantine, every topic
    data_docs: str | None = None
    sql: dict[str, Any] | None = None
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "produced"}
        out["produced"] = self.produced.to_dict() if self.produced else None
        out["ok"] = self.ok
        return out


# -- configuration -------------------------------------------------------------------------


def demo_topics(topic_prefix: str) -> list[str]:
    """The demo's topics under a prefix."""
    return [f"{topic_prefix}{suffix}" for suffix in TOPIC_SUFFIXES]


def load_demo_config(
    path: str | os.PathLike[str] | None = None,
    *,
    lakehouse: str | None = None,
    topic_prefix: str = "demo.",
    env: Mapping[str, str] | None = None,
) -> ProtolakeConfig:
    """Load the demo configuration and apply the demo's overrides (module docstring, step 1).

    Raises:
        pipelines.settings.ConfigError: the file is missing or invalid.
    """
    from pipelines.settings import ConfigError

    environ = os.environ if env is None else env
    source = Path(path) if path is not None else DEMO_CONFIG
    try:
        raw: dict[str, Any] = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {source}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    kafka = raw.setdefault("kafka", {})
    registry = raw.setdefault("registry", {})
    if environ.get(ENV_BOOTSTRAP):
        kafka["bootstrap_servers"] = environ[ENV_BOOTSTRAP]
    if environ.get(ENV_REGISTRY):
        registry["url"] = environ[ENV_REGISTRY]
    if lakehouse:
        raw.setdefault("lakehouse", {})["path"] = lakehouse
    kafka.pop("topic_pattern", None)
    kafka["topics"] = demo_topics(topic_prefix)
    return parse_config(raw, env=environ, source=str(source))


def _registry_conf(cfg: ProtolakeConfig) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    if cfg.registry.basic_auth:
        conf["basic.auth.credentials.source"] = "USER_INFO"
        conf["basic.auth.user.info"] = cfg.registry.basic_auth
    if cfg.registry.bearer_token:
        conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
        conf["bearer.auth.token"] = cfg.registry.bearer_token
    if cfg.registry.ca_bundle:
        conf["ssl.ca.location"] = cfg.registry.ca_bundle
    return conf


# -- the stack -----------------------------------------------------------------------------


def check_stack(cfg: ProtolakeConfig, timeout: float = 5.0) -> list[str]:
    """Problems reaching Kafka and the registry; empty when both answer."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    problems = []
    bootstrap = cfg.kafka.bootstrap_servers
    try:
        admin = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)}
        )
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        problems.append(f"Kafka does not answer at {bootstrap} ({_first_line(exc)})")
    url = cfg.registry.url.rstrip("/")
    if url.startswith("dir:"):
        problems.append(f"the demo needs an HTTP schema registry; registry.url is {url}")
        return problems
    request = urllib.request.Request(f"{url}/subjects")
    if cfg.registry.basic_auth:
        token = b64encode(cfg.registry.basic_auth.encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        problems.append(f"the schema registry at {url} answers HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        problems.append(f"the schema registry does not answer at {url} ({reason})")
    return problems


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def count_topic_records(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Records each topic holds (high minus low watermark, summed over partitions; 0 if absent)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "protolake-demo-probe",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=10)
        counts = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            total = 0
            if meta is not None and meta.error is None:
                for partition in meta.partitions:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=10, cached=False
                    )
                    total += max(high - low, 0)
            counts[topic] = total
        return counts
    finally:
        consumer.close()


# -- the stream ----------------------------------------------------------------------------


def _streams_path(cfg: ProtolakeConfig) -> Path:
    return Path(cfg.lakehouse_path) / STREAMS_FILE


def load_streams(cfg: ProtolakeConfig, topic_prefix: str) -> list[DemoStreamSummary]:
    """The stream summaries recorded in this lakehouse for a topic prefix."""
    path = _streams_path(cfg)
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [DemoStreamSummary.from_dict(d) for d in data.get(topic_prefix, [])]


def save_stream(cfg: ProtolakeConfig, summary: DemoStreamSummary) -> None:
    """Append a stream summary to ``<lakehouse>/_demo/streams.json`` (atomic rewrite)."""
    path = _streams_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.setdefault(summary.topic_prefix, []).append(summary.to_dict())
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2, sort_keys=True)
    os.replace(tmp, path)


def offline_summary(opts: DemoOptions) -> DemoStreamSummary:
    """The summary a stream with these options has, computed without Kafka.

    Counts do not depend on the registry (only schema ids do), so a mock registry gives the
    same counts as the real one.
    """
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient.new_client({"url": "mock://protolake-demo"})
    stream = DemoStream(
        client,
        topic_prefix=opts.topic_prefix,
        records=opts.records,
        seed=opts.seed,
        poison_every=opts.poison_every,
    )
    for _ in stream:
        pass
    return stream.summary


def _merge(summaries: Sequence[DemoStreamSummary], dq_quarantined: bool) -> dict[str, Any]:
    """What the lakehouse must hold for these streams together."""
    per_type: dict[str, int] = {}
    quarantine: dict[str, int] = {}
    records = 0
    for s in summaries:
        records += s.records
        for name, n in s.per_message_type.items():
            per_type[name] = per_type.get(name, 0) + n
        rules = (DQ_QUANTITY,) if dq_quarantined else ()
        for reason, n in s.expected_quarantine_by_reason(rules).items():
            quarantine[reason] = quarantine.get(reason, 0) + n
        if dq_quarantined:
            name = "shop.v1.Order.LineItem"
            per_type[name] = per_type.get(name, 0) - s.dq_violations.get(DQ_QUANTITY, 0)
    return {
        "records": records,
        "silver_by_type": dict(sorted(per_type.items())),
        "quarantine_by_reason": dict(sorted(quarantine.items())),
        "streams": len(summaries),
    }


def _dq_quarantines_quantity(cfg: ProtolakeConfig) -> bool:
    """Whether silver will quarantine the demo's bad quantities (quality exists + the rule)."""
    if (
        importlib.util.find_spec("quality") is None
        or importlib.util.find_spec("quality.checker") is None
    ):
        return False
    for rule in cfg.quality.expectations:
        kwargs = rule.get("kwargs") or {}
        if (
            rule.get("message_type") == "shop.v1.Order.LineItem"
            and rule.get("policy") == "quarantine"
            and kwargs.get("column") == "quantity"
        ):
            return True
    return False


# -- stages --------------------------------------------------------------------------------


def _stage_module(module_name: str) -> Any | None:
    """The stage's module, or None when it does not exist (yet)."""
    try:
        if importlib.util.find_spec(module_name) is None:
            return None
    except ModuleNotFoundError:
        return None
    module = importlib.import_module(module_name)
    return module if callable(getattr(module, "run", None)) else None


def _call_run(run: Callable[..., Any], cfg: ProtolakeConfig, **optional: Any) -> Any:
    """``run(cfg, "available-now", ...)`` with the optional keywords its signature accepts."""
    accepted = inspect.signature(run).parameters
    kwargs = {k: v for k, v in optional.items() if k in accepted}
    return run(cfg, "available-now", **kwargs)


def run_stages(
    cfg: ProtolakeConfig, spark: Any, bronze_tables: Sequence[str], say: Callable[[str], None]
) -> dict[str, str]:
    """Run bronze then silver (available-now); return what happened to each."""
    stages: dict[str, str] = {}
    for stage, module_name in (("bronze", "pipelines.bronze"), ("silver", "pipelines.silver")):
        module = _stage_module(module_name)
        if module is None:
            stages[stage] = "not available yet"
            say(f"{stage}: not available yet ({module_name} has no run()); skipped")
            continue
        t0 = time.monotonic()
        say(f"{stage}: running (available-now) ...")
        _call_run(module.run, cfg, spark=spark, bronze_table_names=list(bronze_tables))
        seconds = time.monotonic() - t0
        stages[stage] = f"ran in {seconds:.1f} s"
        say(f"{stage}: done in {seconds:.1f} s")
    return stages


# -- the report ----------------------------------------------------------------------------


def _table_rows(spark: Any, path: str) -> int:
    return int(spark.read.format("delta").load(path).count())


def collect_report(
    spark: Any,
    cfg: ProtolakeConfig,
    report: DemoReport,
) -> None:
    """Fill ``report`` from the lakehouse (tables, counts, invariant, quality, SQL)."""
    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.quarantine import (
        check_invariant,
        list_delta_tables,
        quarantine_path,
        still_quarantined,
    )

    root = cfg.lakehouse_path.rstrip("/")
    topics = report.topics
    for layer in ("bronze", "silver", "quarantine", "quality"):
        for path in list_delta_tables(spark, f"{root}/{layer}"):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            report.tables.append(
                {"layer": layer, "table": name, "path": path, "rows": _table_rows(spark, path)}
            )

    bronze_names = {bronze_table_of_topic(t) for t in topics}
    bronze_paths = [
        t["path"] for t in report.tables if t["layer"] == "bronze" and t["table"] in bronze_names
    ]
    if bronze_paths:
        total = 0
        for path in bronze_paths:
            total += (
                spark.read.format("delta").load(path).filter(F.col("topic").isin(topics)).count()
            )
        report.bronze_rows = total

    silver_paths = [t["path"] for t in report.tables if t["layer"] == "silver"]
    if report.stages.get("silver", "").startswith("ran") or silver_paths:
        by_type: dict[str, int] = {}
        for path in silver_paths:
            rows = (
                spark.read.format("delta")
                .load(path)
                .filter(F.col("_kafka_topic").isin(topics))
                .groupBy("_message_type")
                .count()
                .collect()
            )
            for row in rows:
                by_type[row["_message_type"]] = by_type.get(row["_message_type"], 0) + int(
                    row["count"]
                )
        report.silver_by_type = dict(sorted(by_type.items()))
        qpath = quarantine_path(root)
        reasons: dict[str, int] = {}
        if any(t["layer"] == "quarantine" for t in report.tables):
            for row in (
                spark.read.format("delta")
                .load(qpath)
                .filter(F.col("_kafka_topic").isin(topics))
                .filter(still_quarantined())
                .groupBy("reason_code")
                .count()
                .collect()
            ):
                reasons[row["reason_code"]] = int(row["count"])
        report.quarantine_by_reason = dict(sorted(reasons.items()))
        if bronze_paths:
            inv = check_invariant(spark, root, bronze_tables=bronze_paths, sample=5)
            report.invariant = {
                "holds": inv.holds,
                "bronze": inv.bronze_records,
                "silver": inv.silver_records,
                "quarantine": inv.quarantined_records,
                "missing": inv.missing,
                "in_both": inv.in_both,
                "duplicated": inv.duplicated,
                "orphans": inv.orphans,
                "bronze_duplicates": inv.bronze_duplicates,
                "offenders": inv.offenders,
            }

    _collect_quality(spark, root, report)
    _collect_sql(spark, cfg, report)
    _evaluate(report)


def _collect_quality(spark: Any, root: str, report: DemoReport) -> None:
    if importlib.util.find_spec("quality") is None:
        return
    quality = importlib.import_module("quality")
    summarize = getattr(quality, "summarize", None)
    if callable(summarize):
        report.quality = list(summarize(spark, root))
    if report.quality and any(t["layer"] == "quarantine" for t in report.tables):
        from pyspark.sql import functions as F  # noqa: N812

        from pipelines.quarantine import quarantine_path, still_quarantined

        # Over every topic, as the quality results are: the two must tell the same story.
        report.dq_failed_rows = int(
            spark.read.format("delta")
            .load(quarantine_path(root))
            .filter(F.col("reason_code") == "DQ_FAILED")
            .filter(still_quarantined())
            .count()
        )
    docs = Path(root) / "quality" / "docs" / "index.html"
    if docs.exists():
        report.data_docs = str(docs)


def _collect_sql(spark: Any, cfg: ProtolakeConfig, report: DemoReport) -> None:
    from pipelines.naming import table_name_for

    table = table_name_for("shop.v1.Order")
    match = [t for t in report.tables if t["layer"] == "silver" and t["table"] == table]
    if not match:
        return
    database = cfg.silver.catalog_database
    source = f"delta.`{match[0]['path']}`"
    try:
        if spark.catalog.tableExists(f"{database}.{table}"):
            source = f"{database}.{table}"
    except Exception:  # noqa: BLE001 - a catalog problem only changes how the query names the table
        pass
    query = (
        "SELECT status,\n"
        "       count(*)                                        AS orders,\n"
        "       sum(size(line_items))                           AS line_items,\n"
        "       round(sum(total.units + total.nanos / 1e9), 2)  AS revenue,\n"
        "       count(sales_channel)                            AS from_schema_v2\n"
        f"FROM {source}\n"
        "GROUP BY status\n"
        "ORDER BY orders DESC"
    )
    try:
        rows = [r.asDict() for r in spark.sql(query).collect()]
        report.sql = {"query": query, "rows": rows}
    except Exception as exc:  # noqa: BLE001 - the example is shown, its failure reported
        report.sql = {"query": query, "error": _first_line(exc)}


def _evaluate(report: DemoReport) -> None:
    checks = report.checks
    if report.bronze_rows is not None:
        checks["bronze holds every record on the topics"] = (
            report.bronze_rows == report.records_on_topics
        )
    if report.invariant is not None:
        checks["bronze = silver + quarantine"] = bool(report.invariant["holds"])
    exp = report.expected
    if (
        exp is not None
        and report.silver_by_type is not None
        and exp["records"] == report.records_on_topics
    ):
        checks["silver rows per message type as the stream predicts"] = (
            report.silver_by_type == exp["silver_by_type"]
        )
        checks["quarantine by reason as the stream predicts"] = (
            report.quarantine_by_reason == exp["quarantine_by_reason"]
        )
    if report.quality is not None:
        silver_tables = {t["table"] for t in report.tables if t["layer"] == "silver"}
        if silver_tables:
            checked = {q.get("table") for q in report.quality}
            checks["every silver table has quality results"] = silver_tables <= checked
    if report.quality and report.dq_failed_rows is not None:
        checks["quality results count every DQ_FAILED row"] = (
            sum(int(q.get("quarantined") or 0) for q in report.quality) == report.dq_failed_rows
        )
    if report.sql is not None:
        checks["the example query runs"] = "rows" in report.sql


def format_report(report: DemoReport) -> str:
    """The report as text a person reads."""
    lines: list[str] = []
    add = lines.append
    add("")
    add("=" * 78)
    add(f"protolake demo: lakehouse {report.lakehouse}")
    add("=" * 78)
    if report.produced is not None:
        p = report.produced
        add(
            f"Stream: produced {p.records} records ({p.poison} poison) to {', '.join(report.topics)}"
        )
        add("  per message type: " + ", ".join(f"{k} {v}" for k, v in p.per_message_type.items()))
        add(
            f"  order schema versions: {p.order_schema_versions}; schema id in a header: {p.header_framed}"
        )
        add(
            "  poison by expected reason: "
            + ", ".join(f"{k} {v}" for k, v in p.poison_by_reason.items())
        )
    else:
        add(
            f"Stream: the topics already hold {report.records_on_topics} records; nothing produced (--append adds more)"
        )
    for stage, what in report.stages.items():
        add(f"{stage.capitalize()}: {what}")
    add("")
    add("Delta tables")
    if not report.tables:
        add("  (none yet)")
    for t in report.tables:
        add(f"  {t['layer'] + '/' + t['table']:<62} {t['rows']:>8} rows")
    exp = report.expected or {}
    if report.quarantine_by_reason is not None:
        add("")
        add("Quarantine by reason (demo topics)          found   expected")
        expected_q = exp.get("quarantine_by_reason", {})
        for reason in sorted(set(report.quarantine_by_reason) | set(expected_q)):
            found = report.quarantine_by_reason.get(reason, 0)
            want = expected_q.get(reason, "-")
            add(f"  {reason:<40} {found:>7} {want!s:>10}")
    if report.silver_by_type is not None:
        add("")
        add("Silver rows by message type (demo topics)   found   expected")
        expected_s = exp.get("silver_by_type", {})
        for name in sorted(set(report.silver_by_type) | set(expected_s)):
            found = report.silver_by_type.get(name, 0)
            want = expected_s.get(name, "-")
            add(f"  {name:<40} {found:>7} {want!s:>10}")
    if report.invariant is not None:
        inv = report.invariant
        state = "HOLDS" if inv["holds"] else "VIOLATED"
        add("")
        add(
            f"Invariant bronze = silver + quarantine: {inv['bronze']} = {inv['silver']} + "
            f"{inv['quarantine']}  {state}"
        )
        if not inv["holds"]:
            add(
                f"  missing {inv['missing']}, in both {inv['in_both']}, twice {inv['duplicated']}, "
                f"not in bronze {inv['orphans']}, twice in bronze {inv['bronze_duplicates']}"
            )
            for kind, offenders in inv["offenders"].items():
                for o in offenders:
                    add(
                        f"    {kind}: {o['topic']}[{o['partition']}]@{o['offset']} in {o['found_in']}"
                    )
    if report.quality is not None:
        add("")
        add("Quality (per silver table: the default suite, plus configured expectations)")
        if not report.quality:
            add("  (no validation results yet)")
        for q in report.quality:
            add(
                f"  {q.get('message_type') or q.get('table')}: checked {q.get('checked', 0)}, "
                f"passed {q.get('passed', 0)}, quarantined {q.get('quarantined', 0)}"
            )
            for expectation, f in sorted((q.get("failed_by_expectation") or {}).items()):
                add(
                    f"    {expectation} [{f.get('policy')}]: {f.get('unexpected_rows', 0)} rows "
                    f"in {f.get('failed_batches', 0)} batch(es)"
                )
        if report.dq_failed_rows is not None:
            quarantined = sum(int(q.get("quarantined") or 0) for q in report.quality)
            add(
                f"  quarantined by quality: {quarantined} (quality results), "
                f"{report.dq_failed_rows} (DQ_FAILED rows in quarantine)"
            )
        if report.data_docs:
            add(f"  Data Docs: file://{report.data_docs}")
    if report.sql is not None:
        add("")
        add(
            "Try it: an analyst's query (run your own with "
            '`.venv/bin/protolake sql --config pipelines/demo.toml "SELECT ..."`; '
            "`--tables` lists what there is)"
        )
        add("  " + report.sql["query"].replace("\n", "\n  ") + ";")
        if "rows" in report.sql:
            rows = report.sql["rows"]
            if rows:
                cols = list(rows[0])
                add("  " + " | ".join(f"{c:>14}" for c in cols))
                for row in rows:
                    add("  " + " | ".join(f"{row[c]!s:>14}" for c in cols))
        else:
            add(f"  (the query failed: {report.sql['error']})")
    add("")
    for name, passed in report.checks.items():
        add(f"[{'ok' if passed else 'FAILED'}] {name}")
    if not report.checks:
        add("(no check could run: no stage has produced tables yet)")
    return "\n".join(lines)


# -- entry points --------------------------------------------------------------------------


def run_demo(opts: DemoOptions, say: Callable[[str], None] = print) -> DemoReport:
    """Steps 1 to 5 of the module docstring; returns the report.

    Raises:
        StackDownError: Kafka or the registry does not answer.
        pipelines.settings.ConfigError: the configuration is invalid.
        DemoStreamError: the stream could not be produced.
    """
    cfg = load_demo_config(opts.config, lakehouse=opts.lakehouse, topic_prefix=opts.topic_prefix)
    topics = list(cfg.kafka.topics)
    problems = check_stack(cfg)
    if problems:
        raise StackDownError("; ".join(problems) + f". {STACK_HINT}")
    report = DemoReport(lakehouse=cfg.lakehouse_path, topics=topics)

    on_topics = count_topic_records(cfg.kafka.bootstrap_servers, topics)
    if opts.append or sum(on_topics.values()) == 0:
        say(f"stream: producing {opts.records} records to {', '.join(topics)} ...")
        summary = produce_demo_stream(
            cfg.kafka.bootstrap_servers,
            cfg.registry.url,
            topic_prefix=opts.topic_prefix,
            records=opts.records,
            seed=opts.seed,
            poison_every=opts.poison_every,
            registry_conf=_registry_conf(cfg),
        )
        save_stream(cfg, summary)
        report.produced = summary
        on_topics = count_topic_records(cfg.kafka.bootstrap_servers, topics)
    else:
        say(
            f"stream: the demo topics already hold {sum(on_topics.values())} records; not producing again"
        )
    report.records_on_topics = sum(on_topics.values())

    streams = load_streams(cfg, opts.topic_prefix)
    if not streams:
        # Produced by a run whose lakehouse is gone: the options give the same counts again.
        candidate = offline_summary(opts)
        if candidate.records == report.records_on_topics:
            streams = [candidate]
    dq = _dq_quarantines_quantity(cfg)
    if streams:
        report.expected = _merge(streams, dq_quarantined=dq)

    from pipelines.spark import build_session

    # Python workers must run this interpreter (the one with protolake installed); Spark's
    # default is whatever "python3" is first on PATH, which finds pipelines/ only by luck
    # (when the current directory is the repository).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session("protolake-demo", master=cfg.spark.master or None, conf=cfg.spark.conf)
    spark.sparkContext.setLogLevel("ERROR")
    bronze_tables = sorted({bronze_table_of_topic(t) for t in topics})
    report.stages = run_stages(cfg, spark, bronze_tables, say)
    collect_report(spark, cfg, report)
    return report


def add_parser(subparsers: Any) -> None:
    """Register ``protolake demo`` (cli.py adds --json and -v)."""
    parser = subparsers.add_parser(
        "demo",
        help="produce a demo stream and run every stage on it",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help=f"TOML configuration (default: {DEMO_CONFIG})",
    )
    parser.add_argument(
        "--lakehouse", default=None, metavar="DIR", help="lakehouse root (overrides the file)"
    )
    parser.add_argument(
        "--topic-prefix", default="demo.", help="prefix of the demo topics (default: demo.)"
    )
    parser.add_argument(
        "--records", type=int, default=3000, help="records per stream (default: 3000)"
    )
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default: 7)")
    parser.add_argument(
        "--poison-every", type=int, default=50, help="every n-th record is poison (0: none)"
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="produce another stream even if the topics hold records",
    )
    # The demo runs each stage once and stops: a processing-time trigger would never return.
    parser.add_argument(
        "--trigger",
        choices=("available-now",),
        default="available-now",
        help="the demo runs every stage with the available-now trigger",
    )
    parser.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake demo``: run the demo, print the report; exit code 0 when every check passed."""
    if args.records < 0 or args.poison_every < 0:
        print("protolake demo: --records and --poison-every must be >= 0", file=sys.stderr)
        return 2
    opts = DemoOptions(
        config=args.config,
        lakehouse=args.lakehouse,
        topic_prefix=args.topic_prefix,
        records=args.records,
        seed=args.seed,
        poison_every=args.poison_every,
        append=args.append,
    )
    as_json = bool(getattr(args, "json", False))

    def say(line: str) -> None:
        print(line, file=sys.stderr if as_json else sys.stdout, flush=True)

    try:
        report = run_demo(opts, say)
    except StackDownError as exc:
        print(f"protolake demo: {exc}", file=sys.stderr)
        return 1
    except DemoStreamError as exc:
        print(f"protolake demo: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        print(format_report(report), flush=True)
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.demo [options]``: the same as ``protolake demo``."""
    from pipelines.cli import main as cli_main

    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
