"""What the demo stream is: its topics, the rules it breaks on purpose, its poison records, and
the record and summary types the rest of the demo passes around.

What the stream contains, per topic (``<prefix>`` is the topic prefix, ``demo.`` by default):

===================  =====================================  ===========================
topic                value types (message indexes)          subject name strategy, extras
===================  =====================================  ===========================
<prefix>orders       shop.v1.Order [0],                     TopicNameStrategy; the file
                     shop.v1.OrderStatusChanged [3]         evolves from v1 to v2 halfway
<prefix>order_lines  shop.v1.Order.LineItem [0, 1] (nested;  TopicNameStrategy; evolves too
                     the map entry comes first)
<prefix>customers    shop.v1.Customer [0]                   TopicNameStrategy; keys framed
                                                            as shop.v1.CustomerKey [1]
<prefix>inventory    shop.v1.StockLevel [0],                TopicRecordNameStrategy; half
                     shop.v1.StockMovement [1] (proto2)     the records carry the schema
                                                            GUID in a header instead
===================  =====================================  ===========================

- Record ``i`` (0-based) is a poison record when ``poison_every`` divides ``i + 1``; the k-th
  poison record is of kind ``POISON_KINDS[k % 7]`` on topic ``k % 4`` (see :data:`POISON_KINDS`
  for the kinds and the quarantine reason code each one must get).
- Order types are written with schema version 1 for records ``i < records // 2`` and with the
  evolved version 2 after that (:mod:`pipelines.demo.schemas`).
- A few records violate the demo's data-quality expectations on purpose (line-item quantity
  outside ``QUANTITY_RANGE``, customer e-mail not matching ``EMAIL_PATTERN``); they are
  counted in :attr:`DemoStreamSummary.dq_violations`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.naming import table_name_for

#: Topic names without the prefix, in the order poison records are spread over them.
TOPIC_SUFFIXES: tuple[str, ...] = ("orders", "order_lines", "customers", "inventory")
PARTITIONS = 3

#: Data-quality rules the stream violates on purpose (pipelines/demo/demo.toml declares them).
QUANTITY_RANGE: tuple[int, int] = (1, 100)
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"
#: the message type the quantity rule checks
LINE_ITEM = "shop.v1.Order.LineItem"
DQ_QUANTITY = f"{LINE_ITEM}.quantity between 1 and 100"
DQ_EMAIL = "shop.v1.Customer.email matches e-mail pattern"


@dataclass(frozen=True)
class PoisonKind:
    """A kind of broken record and the quarantine reason code the pipeline must give it."""

    name: str
    reason_code: str
    description: str


#: Every kind of poison record the demo produces, with its expected reason code.
POISON_KINDS: tuple[PoisonKind, ...] = (
    PoisonKind("wrong_magic", "BAD_MAGIC", "a valid frame whose magic byte is 5"),
    PoisonKind("unknown_schema_id", "UNKNOWN_SCHEMA", "magic 0 and a schema id never registered"),
    PoisonKind("truncated_frame", "TRUNCATED", "the first 3 bytes of a valid frame"),
    PoisonKind("plain_json", "BAD_MAGIC", "the record as JSON text, no framing"),
    PoisonKind("empty_value", "EMPTY_VALUE", "a zero-length value (not a tombstone)"),
    PoisonKind(
        "corrupt_payload", "BAD_PAYLOAD", "a valid prefix, then a cut length-delimited field"
    ),
    PoisonKind(
        "unknown_schema_guid",
        "UNKNOWN_SCHEMA",
        "a schema GUID header naming no registered schema",
    ),
)

# Header names confluent-kafka's header_schema_id_serializer uses (and Java's serializer).
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
KEY_SCHEMA_ID_HEADER = "__key_schema_id"


class DemoStreamError(RuntimeError):
    """The demo stream could not be produced (schemas, broker or registry)."""


@dataclass
class DemoStreamSummary:
    """What a stream (:func:`pipelines.demo.produce.produce_demo_stream`) holds, for comparison
    with the lakehouse.

    ``per_message_type`` counts well-formed value records by fully-qualified type (poison
    records are not in it); ``poison_by_reason`` counts poison records by the reason code the
    pipeline must quarantine them with; ``dq_violations`` counts well-formed records that break
    one of the demo's data-quality rules (by rule label, see ``DQ_QUANTITY``/``DQ_EMAIL``).
    ``poison_by_topic_reason`` and ``dq_violations_by_topic`` are those per topic, for
    :meth:`on_topics`: what a job configured with some of the topics must land.
    """

    topic_prefix: str
    seed: int
    records: int = 0
    topics: list[str] = field(default_factory=list)
    per_topic: dict[str, int] = field(default_factory=dict)
    per_message_type: dict[str, int] = field(default_factory=dict)
    per_topic_message_type: dict[str, dict[str, int]] = field(default_factory=dict)
    poison_by_kind: dict[str, int] = field(default_factory=dict)
    poison_by_reason: dict[str, int] = field(default_factory=dict)
    poison_by_topic: dict[str, int] = field(default_factory=dict)
    header_framed: int = 0
    framed_keys: int = 0
    order_schema_versions: dict[str, int] = field(default_factory=dict)
    schema_ids_by_type: dict[str, list[int]] = field(default_factory=dict)
    schema_guids_by_type: dict[str, list[str]] = field(default_factory=dict)
    dq_violations: dict[str, int] = field(default_factory=dict)
    poison_by_topic_reason: dict[str, dict[str, int]] = field(default_factory=dict)
    dq_violations_by_topic: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def poison(self) -> int:
        """Number of poison records."""
        return sum(self.poison_by_kind.values())

    @property
    def well_formed(self) -> int:
        """Number of records the pipeline can decode."""
        return self.records - self.poison

    def expected_quarantine_by_reason(
        self, quarantine_rules: Iterable[str] = (DQ_QUANTITY,)
    ) -> dict[str, int]:
        """Quarantine rows the pipeline must write, by reason code.

        Args:
            quarantine_rules: the data-quality rules whose policy is ``quarantine`` (their
                violations become ``DQ_FAILED`` rows); the demo configuration has one.
        """
        return _expected_quarantine(self.poison_by_reason, self.dq_violations, quarantine_rules)

    def on_topics(self, topics: Iterable[str]) -> StreamPart:
        """What the stream holds on ``topics`` (some of :attr:`topics`; the part lists them
        sorted): a job configured with those topics alone must land exactly that.

        Raises:
            ValueError: a topic is not one of the stream's.
        """
        chosen = sorted(set(topics))
        unknown = [t for t in chosen if t not in self.per_topic]
        if unknown:
            raise ValueError(f"not topics of this stream: {unknown}; it has {self.topics}")
        types, reasons, dq = Counter[str](), Counter[str](), Counter[str]()
        for topic in chosen:
            types.update(self.per_topic_message_type.get(topic, {}))
            reasons.update(self.poison_by_topic_reason.get(topic, {}))
            dq.update(self.dq_violations_by_topic.get(topic, {}))
        return StreamPart(
            topics=chosen,
            records=sum(self.per_topic[t] for t in chosen),
            per_topic={t: self.per_topic[t] for t in chosen},
            per_message_type=dict(sorted(types.items())),
            poison_by_reason=dict(sorted(reasons.items())),
            dq_violations=dict(sorted(dq.items())),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (see :meth:`from_dict`)."""
        return asdict(self)

    def to_json(self) -> str:
        """The summary as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DemoStreamSummary:
        """Rebuild a summary written by :meth:`to_dict`."""
        return cls(**dict(data))


@dataclass(frozen=True)
class StreamPart:
    """The records of a demo stream on some of its topics
    (:meth:`DemoStreamSummary.on_topics`), counted as the summary counts the whole stream."""

    topics: list[str]
    records: int
    per_topic: dict[str, int]
    per_message_type: dict[str, int]
    poison_by_reason: dict[str, int]
    dq_violations: dict[str, int]

    @property
    def well_formed(self) -> int:
        """Number of records the pipeline can decode."""
        return self.records - sum(self.poison_by_reason.values())

    def expected_quarantine_by_reason(
        self, quarantine_rules: Iterable[str] = (DQ_QUANTITY,)
    ) -> dict[str, int]:
        """Quarantine rows a job on these topics must write, by reason code (as
        :meth:`DemoStreamSummary.expected_quarantine_by_reason`)."""
        return _expected_quarantine(self.poison_by_reason, self.dq_violations, quarantine_rules)

    def silver_rows_by_table(
        self, quarantine_rules: Iterable[str] = (DQ_QUANTITY,)
    ) -> dict[str, int]:
        """The rows of each silver table a job on these topics must fill, by table name
        (``pipelines.naming.table_name_for``), with the same ``quarantine_rules`` as
        :meth:`expected_quarantine_by_reason` (the quantity rule's rows leave the line items'
        table). Compare it with the tables that hold rows: a corrupt payload is framed with
        the schema id of the demo's last good record, which may be another topic's type, so
        silver may also create an empty table of a type these topics do not carry."""
        rows = dict(self.per_message_type)
        if DQ_QUANTITY in quarantine_rules and self.dq_violations.get(DQ_QUANTITY):
            rows[LINE_ITEM] -= self.dq_violations[DQ_QUANTITY]
        return {table_name_for(t): n for t, n in rows.items()}


def _expected_quarantine(
    poison_by_reason: Mapping[str, int],
    dq_violations: Mapping[str, int],
    quarantine_rules: Iterable[str],
) -> dict[str, int]:
    expected = dict(poison_by_reason)
    dq = sum(dq_violations.get(rule, 0) for rule in quarantine_rules)
    if dq:
        expected["DQ_FAILED"] = expected.get("DQ_FAILED", 0) + dq
    return expected


@dataclass(frozen=True)
class DemoRecord:
    """One record of the demo stream, ready for ``Producer.produce``."""

    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    #: Fully-qualified type of the value; None for a poison record.
    message_type: str | None
    #: The poison kind (see POISON_KINDS); None for a well-formed record.
    poison: str | None = None


def demo_topics(topic_prefix: str) -> list[str]:
    """The demo's topics under a prefix, in :data:`TOPIC_SUFFIXES` order."""
    return [f"{topic_prefix}{suffix}" for suffix in TOPIC_SUFFIXES]
