"""``make demo``: produce the demo shop's stream, run every pipeline stage, print what landed.

Run as ``python -m pipelines.demo [options]`` or ``protolake demo [options]``. Steps:

1. Configuration (:mod:`pipelines.demo.config`): ``--config FILE`` (default: the embedded
   ``pipelines/demo/demo.toml``), then the demo's overrides (environment, ``--lakehouse``,
   the topics under ``--topic-prefix``).
2. The stack must be up: Kafka answers a metadata request and the registry ``GET /subjects``;
   otherwise one line per problem says to run ``infra/stack.sh up`` (exit 1).
3. The stream (:mod:`pipelines.demo.produce`) is produced only when the demo topics hold no
   record yet, so running the demo twice is safe: the second run produces nothing, the
   pipelines find nothing new (their checkpoints are in the lakehouse) and the summary is the
   same. ``--append`` produces another stream on top (the pipelines then take the new
   records only). What was produced is kept in ``<lakehouse>/_demo/streams.json``; the
   summary compares the lakehouse with it (:mod:`pipelines.demo.expected`).
4. Bronze, then silver, with the available-now trigger.
5. The summary (:mod:`pipelines.demo.collect`, :mod:`pipelines.demo.report`): every Delta
   table under the lakehouse with its row count, quarantine by reason (with what the stream
   makes expected), the invariant bronze = silver + quarantine (record by record), the quality
   summary (every silver table: the default suite, plus the expectations ``demo.toml``
   declares for three of the six message types) and the Data Docs path, and an example query
   with its result.

Exit code 0 when every check that could run passed (Kafka's record count = bronze rows; the
invariant; silver and quarantine counts = what the stream predicts; every silver table has
quality results), 1 otherwise. While it runs it says one short line per stage and per
micro-batch (records, tables, seconds; a bar where the total is known): the stage lines on
stdout, the batch lines on stderr (:mod:`pipelines.progress`). ``--json`` prints the report as
JSON instead of text, every line of progress going to stderr; ``-v`` adds protolake's debug
log.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from lakehouse.layout import Layout
from pipelines import progress
from pipelines.demo.config import DEMO_CONFIG, DemoOptions, load_demo_config
from pipelines.demo.expected import (
    dq_quarantines_quantity,
    expected_counts,
    load_streams,
    offline_summary,
    save_stream,
)
from pipelines.demo.produce import (
    check_stack,
    count_topic_records,
    produce_demo_stream,
)
from pipelines.demo.report import DemoReport, format_report
from pipelines.demo.stream import DemoStreamError
from pipelines.naming import bronze_table_of_topic
from pipelines.progress import ProgressBar
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import open_session, registry_client_conf

STACK_HINT = "start the local stack first: infra/stack.sh up  (or: make demo)"


class StackDownError(RuntimeError):
    """Kafka or the schema registry does not answer."""


def run_stages(
    cfg: ProtolakeConfig,
    spark: Any,
    bronze_tables: Sequence[str],
    say: Callable[[str], None],
    on_topics: int | None = None,
) -> dict[str, str]:
    """Run bronze then silver (available-now); return what each did, as a line.

    Each stage says what it starts and what it did; each micro-batch is a line of its own
    (:mod:`pipelines.progress`), with a bar when the stage knows how many records it takes.
    """
    from pipelines import bronze, silver

    layout = Layout(cfg.lakehouse_path)
    paths = [layout.bronze_table(t) for t in bronze_tables]
    before = _rows(spark, paths)
    stages: dict[str, str] = {}
    t0 = time.monotonic()
    new = on_topics - before if on_topics is not None and before is not None else None
    progress.expect("bronze", new)
    say(f"bronze: taking Kafka's new records into {len(paths)} tables (available-now) ...")
    queries = bronze.run(cfg, "available-now", spark=spark)
    taken = int(bronze.summarize(queries, cfg)["records"])
    stages["bronze"] = f"{taken} records -> {len(paths)} tables in {time.monotonic() - t0:.1f} s"
    say(f"bronze: {stages['bronze']}")

    t0 = time.monotonic()
    # silver takes what bronze took now (the demo's runs leave nothing behind in bronze)
    progress.expect("silver", taken)
    say(f"silver: decoding {len(paths)} bronze tables (available-now) ...")
    result = silver.run(cfg, "available-now", spark=spark, bronze_table_names=list(bronze_tables))
    s = silver.summarize(result, cfg)
    quarantined = sum(s["quarantined"].values())
    stages["silver"] = (
        f"{s['records']} records -> {len(s['tables'])} tables, {quarantined} quarantined "
        f"in {time.monotonic() - t0:.1f} s"
    )
    say(f"silver: {stages['silver']}")
    return stages


def _rows(spark: Any, paths: Sequence[str]) -> int | None:
    """Rows of the tables that exist (Delta answers from its statistics); None on failure."""
    from lakehouse.tables import is_delta_table

    try:
        return sum(
            int(spark.read.format("delta").load(p).count())
            for p in paths
            if is_delta_table(p, spark)
        )
    except Exception:  # noqa: BLE001 - only a progress bar depends on it
        return None


def produce_if_empty(
    spark: Any,
    cfg: ProtolakeConfig,
    opts: DemoOptions,
    report: DemoReport,
    say: Callable[[str], None],
) -> None:
    """Step 3: produce a stream when the topics are empty (or on ``--append``); count them."""
    topics = report.topics
    on_topics = count_topic_records(cfg.kafka.bootstrap_servers, topics)
    if opts.append or sum(on_topics.values()) == 0:
        say(f"stream: producing {opts.records} records to {', '.join(topics)} ...")
        bar = ProgressBar("stream:", opts.records)
        summary = produce_demo_stream(
            cfg.kafka.bootstrap_servers,
            cfg.registry.url,
            topic_prefix=opts.topic_prefix,
            records=opts.records,
            seed=opts.seed,
            poison_every=opts.poison_every,
            registry_conf=registry_client_conf(cfg),
            on_progress=bar.update,
        )
        bar.close()
        save_stream(spark, cfg, summary)
        report.produced = summary
        on_topics = count_topic_records(cfg.kafka.bootstrap_servers, topics)
    else:
        say(
            f"stream: the demo topics already hold {sum(on_topics.values())} records; "
            "not producing again"
        )
    report.records_on_topics = sum(on_topics.values())
    streams = load_streams(spark, cfg, opts.topic_prefix)
    if not streams:
        # Produced by a run whose lakehouse is gone: the options give the same counts again.
        candidate = offline_summary(opts)
        if candidate.records == report.records_on_topics:
            streams = [candidate]
    if streams:
        report.expected = expected_counts(streams, dq_quarantined=dq_quarantines_quantity(cfg))


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

    from pipelines.demo.collect import collect_report

    # Python workers must run this interpreter (the one with protolake installed); Spark's
    # default is whatever "python3" is first on PATH, which finds pipelines/ only by luck
    # (when the current directory is the repository).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Before producing: an object-store lakehouse that cannot be used fails here
    # (pipelines.settings.preflight), with nothing produced nor written.
    spark = open_session(cfg, "protolake-demo")
    spark.sparkContext.setLogLevel("ERROR")
    produce_if_empty(spark, cfg, opts, report, say)
    bronze_tables = sorted({bronze_table_of_topic(t) for t in topics})
    report.stages = run_stages(cfg, spark, bronze_tables, say, report.records_on_topics)
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
        # with --json, stdout is the report and stderr the JSON lines of each batch (``cli``)
        if not as_json:
            print(line, flush=True)

    try:
        report = run_demo(opts, say)
    except (StackDownError, DemoStreamError) as exc:
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
