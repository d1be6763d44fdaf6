"""The demo stream as records: well-formed Confluent-framed Protobuf, and poison records.

:class:`DemoStream` yields :class:`pipelines.demo.stream.DemoRecord` values ready for
``Producer.produce`` and counts them in a :class:`pipelines.demo.stream.DemoStreamSummary`
(what the stream holds: :mod:`pipelines.demo.stream`). Values are serialized with
confluent-kafka's own ``ProtobufSerializer`` against a schema registry client
(auto-registration, references registered under their file name, e.g. ``shop/common.proto``).

The content, keys and order of the records are a function of ``seed`` alone; only registry
ids depend on the registry. Serializing raises :class:`pipelines.demo.stream.DemoStreamError`
when the registry refuses a schema.
"""

from __future__ import annotations

import json
import random
import re
import struct
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, cast

from google.protobuf.message import Message

from codec.framing import read_message_indexes
from pipelines.demo.schemas import SchemaVersion, load_schema_versions
from pipelines.demo.shop import ShopGenerator
from pipelines.demo.stream import (
    DQ_EMAIL,
    DQ_QUANTITY,
    EMAIL_PATTERN,
    POISON_KINDS,
    QUANTITY_RANGE,
    TOPIC_SUFFIXES,
    VALUE_SCHEMA_ID_HEADER,
    DemoRecord,
    DemoStreamError,
    DemoStreamSummary,
)


def _frame_prefix(frame: bytes) -> bytes:
    """Magic byte, schema id and message indexes of a prefix-framed value, payload dropped."""
    _, end = read_message_indexes(frame, 5)
    return frame[:end]


class DemoStream:
    """The demo stream as an iterator of :class:`DemoRecord`; :attr:`summary` counts them.

    Serializing registers the schemas with ``registry_client`` (any confluent-kafka
    ``SchemaRegistryClient``; ``SchemaRegistryClient.new_client({"url": "mock://x"})`` works
    offline). The summary is complete once the iterator is exhausted. Iterate once.
    """

    def __init__(
        self,
        registry_client: Any,
        *,
        topic_prefix: str = "demo.",
        records: int = 3000,
        seed: int = 7,
        poison_every: int = 50,
        versions: Mapping[str, SchemaVersion] | None = None,
    ) -> None:
        if records < 0 or poison_every < 0:
            raise ValueError("records and poison_every must be >= 0")
        self.client = registry_client
        self.records = records
        self.poison_every = poison_every
        self.versions = versions if versions is not None else load_schema_versions()
        self.topics = {suffix: f"{topic_prefix}{suffix}" for suffix in TOPIC_SUFFIXES}
        self.summary = DemoStreamSummary(
            topic_prefix=topic_prefix, seed=seed, topics=list(self.topics.values())
        )
        self._rng = random.Random(seed)
        self._gen = ShopGenerator(self._rng, self.versions)
        self._serializers: dict[tuple[str, str, str, bool, bool], Any] = {}
        # A recent well-formed prefix frame and its payload: raw material of poison records.
        self._last_frame = b""
        self._last_payload = b""
        self._per_topic: Counter[str] = Counter()
        self._per_type: Counter[str] = Counter()
        self._per_topic_type: dict[str, Counter[str]] = {t: Counter() for t in self.topics.values()}
        self._poison_kind: Counter[str] = Counter()
        # per topic: the reason codes of its poison records, its data-quality violations (the
        # summary's totals are their sums)
        self._poison_topic_reason: dict[str, Counter[str]] = {
            t: Counter() for t in self.topics.values()
        }
        self._dq_topic: dict[str, Counter[str]] = {t: Counter() for t in self.topics.values()}
        self._order_versions: Counter[str] = Counter()
        self._ids_by_type: dict[str, set[int]] = {}
        self._guids_by_type: dict[str, set[str]] = {}

    # Subject name strategy per topic (pipelines.demo.stream): two types on inventory get a
    # subject each, the other topics one subject per topic and field.
    _STRATEGIES = {
        "orders": "topic",
        "order_lines": "topic",
        "customers": "topic",
        "inventory": "topic_record",
    }

    def _serialize(
        self,
        suffix: str,
        version: SchemaVersion,
        msg: Message,
        headers: list[tuple[str, bytes]],
        *,
        key: bool = False,
        in_header: bool = False,
    ) -> bytes:
        from confluent_kafka.schema_registry import (
            SchemaRegistryError,
            header_schema_id_serializer,
            topic_record_subject_name_strategy,
            topic_subject_name_strategy,
        )
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from confluent_kafka.serialization import (
            MessageField,
            SerializationContext,
            SerializationError,
        )

        name = msg.DESCRIPTOR.full_name
        cache_key = (suffix, version.name, name, key, in_header)
        ser = self._serializers.get(cache_key)
        if ser is None:
            strategy = (
                topic_record_subject_name_strategy
                if self._STRATEGIES[suffix] == "topic_record"
                else topic_subject_name_strategy
            )
            # An explicit strategy also keeps 2.16's default "associated" strategy from
            # asking the registry for topic associations first.
            conf: dict[str, Any] = {
                "auto.register.schemas": True,
                "subject.name.strategy": strategy,
            }
            if in_header:
                conf["schema.id.serializer"] = header_schema_id_serializer
            ser = ProtobufSerializer(version.message_class(name), self.client, conf)
            self._serializers[cache_key] = ser
        field_ = MessageField.KEY if key else MessageField.VALUE
        ctx = SerializationContext(self.topics[suffix], field_, cast(Any, headers))
        try:
            return bytes(ser(msg, ctx))
        except (SchemaRegistryError, SerializationError) as exc:
            raise DemoStreamError(
                f"could not serialize {name} for {self.topics[suffix]}: {exc}"
            ) from exc

    def _good_record(self, i: int) -> DemoRecord:
        rng, gen, versions = self._rng, self._gen, self.versions
        order_version = versions["v1"] if i < self.records // 2 else versions["v2"]
        roll = rng.random()
        headers: list[tuple[str, bytes]] = []
        key: bytes | None
        msg: Message
        if roll < 0.28:
            suffix, version = "orders", order_version
            ident, msg = gen.order(version, i)
            key = ident.encode()
        elif roll < 0.38:
            suffix, version = "orders", order_version
            ident, msg = gen.status_changed(version, i)
            key = ident.encode()
        elif roll < 0.62:
            suffix, version = "order_lines", order_version
            ident, msg, qty = gen.order_line(version, i)
            key = ident.encode()
            if not QUANTITY_RANGE[0] <= qty <= QUANTITY_RANGE[1]:
                self._dq_topic[self.topics[suffix]][DQ_QUANTITY] += 1
        elif roll < 0.78:
            suffix, version = "customers", versions["v1"]
            ident, msg, email = gen.customer(version, i)
            key_msg: Any = version.message_class("shop.v1.CustomerKey")()
            key_msg.customer_id = ident
            key = self._serialize(suffix, version, key_msg, headers, key=True)
            if not re.fullmatch(EMAIL_PATTERN, email):
                self._dq_topic[self.topics[suffix]][DQ_EMAIL] += 1
        else:
            suffix, version = "inventory", versions["v1"]
            if rng.random() < 0.6:
                ident, msg = gen.stock_level(version, i)
            else:
                ident, msg = gen.stock_movement(version, i)
            key = ident.encode()
        in_header = suffix == "inventory" and rng.random() < 0.5
        value = self._serialize(suffix, version, msg, headers, in_header=in_header)
        name = msg.DESCRIPTOR.full_name
        if suffix in ("orders", "order_lines"):
            self._order_versions[version.name] += 1
        if in_header:
            guid = str(uuid.UUID(bytes=dict(headers)[VALUE_SCHEMA_ID_HEADER][1:17]))
            self._guids_by_type.setdefault(name, set()).add(guid)
            self.summary.header_framed += 1
        else:
            self._ids_by_type.setdefault(name, set()).add(struct.unpack(">I", value[1:5])[0])
            self._last_frame = value
            self._last_payload = msg.SerializeToString()
        if key is not None and suffix == "customers":
            self.summary.framed_keys += 1
        topic = self.topics[suffix]
        self._per_type[name] += 1
        self._per_topic_type[topic][name] += 1
        return DemoRecord(topic, key, value, headers, name)

    def _poison_record(self, k: int, i: int) -> DemoRecord:
        kind = POISON_KINDS[k % len(POISON_KINDS)]
        topic = self.topics[TOPIC_SUFFIXES[k % len(TOPIC_SUFFIXES)]]
        if not self._last_frame:  # poison before any good record: serialize one, unsent
            _, msg = self._gen.stock_level(self.versions["v1"], i)
            self._last_frame = self._serialize("inventory", self.versions["v1"], msg, [])
            self._last_payload = msg.SerializeToString()
        frame, payload = self._last_frame, self._last_payload
        headers: list[tuple[str, bytes]] = []
        if kind.name == "wrong_magic":
            value = b"\x05" + frame[1:]
        elif kind.name == "unknown_schema_id":
            value = b"\x00" + struct.pack(">I", 0x7F000000 + k) + b"\x00" + payload
        elif kind.name == "truncated_frame":
            value = frame[:3]
        elif kind.name == "plain_json":
            doc = {
                "order_id": f"ord-{k:06d}",
                "status": "PLACED",
                "total": {"currency": "EUR", "units": 12},
            }
            value = json.dumps(doc).encode()
        elif kind.name == "empty_value":
            value = b""
        elif kind.name == "corrupt_payload":
            # Field 1, wire type 2, length 1000, then only 3 bytes: protobuf must reject it.
            value = _frame_prefix(frame) + b"\x0a\xe8\x07abc"
        else:  # unknown_schema_guid
            guid = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            headers.append((VALUE_SCHEMA_ID_HEADER, b"\x01" + guid.bytes + b"\x00"))
            value = payload
        self._poison_kind[kind.name] += 1
        self._poison_topic_reason[topic][kind.reason_code] += 1
        return DemoRecord(topic, f"poison-{k:05d}".encode(), value, headers, None, kind.name)

    def __iter__(self) -> Iterator[DemoRecord]:
        poison_seen = 0
        for i in range(self.records):
            if self.poison_every and (i + 1) % self.poison_every == 0:
                record = self._poison_record(poison_seen, i)
                poison_seen += 1
            else:
                record = self._good_record(i)
            self._per_topic[record.topic] += 1
            yield record
        self._finish()

    def _finish(self) -> None:
        s = self.summary
        s.records = sum(self._per_topic.values())
        s.per_topic = {t: self._per_topic.get(t, 0) for t in self.topics.values()}
        s.per_message_type = dict(sorted(self._per_type.items()))
        s.per_topic_message_type = {
            t: dict(sorted(c.items())) for t, c in self._per_topic_type.items()
        }
        s.poison_by_kind = dict(sorted(self._poison_kind.items()))
        reasons = sum(self._poison_topic_reason.values(), Counter())
        s.poison_by_reason = dict(sorted(reasons.items()))
        s.poison_by_topic = {
            t: sum(c.values()) for t, c in sorted(self._poison_topic_reason.items()) if c
        }
        s.poison_by_topic_reason = {
            t: dict(sorted(c.items())) for t, c in self._poison_topic_reason.items()
        }
        s.dq_violations_by_topic = {t: dict(sorted(c.items())) for t, c in self._dq_topic.items()}
        s.order_schema_versions = dict(sorted(self._order_versions.items()))
        s.schema_ids_by_type = {n: sorted(v) for n, v in sorted(self._ids_by_type.items())}
        s.schema_guids_by_type = {n: sorted(v) for n, v in sorted(self._guids_by_type.items())}
        dq = sum(self._dq_topic.values(), Counter())
        s.dq_violations = {rule: dq[rule] for rule in (DQ_QUANTITY, DQ_EMAIL)}
