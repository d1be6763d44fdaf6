"""What the lakehouse must hold: the streams produced into it, and the counts they predict.

Every stream the demo produces is recorded in ``<lakehouse>/_demo/streams.json`` (keyed by
topic prefix, one summary per stream; written whole through the session's Hadoop file
system, so an ``s3a://`` lakehouse keeps it too).
:func:`expected_counts` merges those summaries into the counts the report compares with: rows
per message type in silver and quarantine rows per reason. When the quality rule on line-item
quantities has the ``quarantine`` policy (:func:`dq_quarantines_quantity`), the line items
that break it move from silver to quarantine (``DQ_FAILED``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lakehouse.checkpoints import read_text_lines, write_text
from lakehouse.layout import Layout
from pipelines.demo.config import DemoOptions
from pipelines.demo.generate import DemoStream
from pipelines.demo.stream import DQ_QUANTITY, LINE_ITEM, DemoStreamSummary
from pipelines.settings import ProtolakeConfig

STREAMS_FILE = "_demo/streams.json"


def streams_path(cfg: ProtolakeConfig) -> str:
    """``<lakehouse>/_demo/streams.json`` (a path or URI)."""
    return f"{Layout(cfg.lakehouse_path).root}/{STREAMS_FILE}"


def _read_streams(spark: Any, cfg: ProtolakeConfig) -> dict[str, Any]:
    lines = read_text_lines(spark, streams_path(cfg))
    return json.loads("\n".join(lines)) if lines else {}


def load_streams(spark: Any, cfg: ProtolakeConfig, topic_prefix: str) -> list[DemoStreamSummary]:
    """The stream summaries recorded in this lakehouse for a topic prefix."""
    data = _read_streams(spark, cfg)
    return [DemoStreamSummary.from_dict(d) for d in data.get(topic_prefix, [])]


def save_stream(spark: Any, cfg: ProtolakeConfig, summary: DemoStreamSummary) -> None:
    """Append a stream summary to ``<lakehouse>/_demo/streams.json`` (the file is rewritten)."""
    data = _read_streams(spark, cfg)
    data.setdefault(summary.topic_prefix, []).append(summary.to_dict())
    write_text(spark, streams_path(cfg), json.dumps(data, indent=2, sort_keys=True))


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


def expected_counts(summaries: Sequence[DemoStreamSummary], dq_quarantined: bool) -> dict[str, Any]:
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
            per_type[LINE_ITEM] = per_type.get(LINE_ITEM, 0) - s.dq_violations.get(DQ_QUANTITY, 0)
    return {
        "records": records,
        "silver_by_type": dict(sorted(per_type.items())),
        "quarantine_by_reason": dict(sorted(quarantine.items())),
        "streams": len(summaries),
    }


def dq_quarantines_quantity(cfg: ProtolakeConfig) -> bool:
    """Whether silver will quarantine the demo's bad quantities (the configured rule)."""
    for rule in cfg.quality.expectations:
        kwargs = rule.get("kwargs") or {}
        if (
            rule.get("message_type") == LINE_ITEM
            and rule.get("policy") == "quarantine"
            and kwargs.get("column") == "quantity"
        ):
            return True
    return False
