"""The demo stream on the real broker and registry, read back with confluent-kafka's own
Consumer and ProtobufDeserializer, and with protolake's codec: what is on the topics is what
the summary says, poison records do not deserialize, and each gets the reason code the
summary promises."""

from __future__ import annotations

import base64
import uuid
from collections import Counter, defaultdict
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient, dual_schema_id_deserializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2

from codec import CodecError, Decoder, open_registry
from pipelines.demo.produce import produce_demo_stream
from pipelines.demo.schemas import load_schema_versions
from pipelines.demo.stream import POISON_KINDS, VALUE_SCHEMA_ID_HEADER

pytestmark = pytest.mark.integration

RECORDS = 300
POISON_EVERY = 20


def consume_all(bootstrap: str, topics: list[str]) -> list[Any]:
    """Every record of the topics, from the low to the high watermark of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-it-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(timeout=10)
        assignment, remaining = [], {}
        for topic in topics:
            for p in metadata.topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high > low:
                    assignment.append(TopicPartition(topic, p, low))
                    remaining[(topic, p)] = high
        consumer.assign(assignment)
        out = []
        misses = 0
        while remaining and misses < 30:
            msg = consumer.poll(1.0)
            if msg is None:
                misses += 1
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
            if msg.offset() + 1 >= remaining.get((msg.topic(), msg.partition()), 0):
                remaining.pop((msg.topic(), msg.partition()), None)
        assert not remaining, f"could not read to the end of {remaining}"
        return out
    finally:
        consumer.close()


def message_name_at(schema_str: str, indexes: list[int]) -> str:
    """Full name of the message the Confluent indexes point to in a serialized schema."""
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_str))
    names, level = [], fd.message_type
    for i in indexes:
        names.append(level[i].name)
        level = level[i].nested_type
    return ".".join([fd.package, *names]) if fd.package else ".".join(names)


@pytest.fixture(scope="module")
def produced(bootstrap, registry_url, topic_prefix_factory, tmp_path_factory):
    prefix = topic_prefix_factory()
    summary = produce_demo_stream(
        bootstrap,
        registry_url,
        topic_prefix=prefix,
        records=RECORDS,
        seed=5,
        poison_every=POISON_EVERY,
        cache_dir=tmp_path_factory.mktemp("schemas"),
    )
    return summary, consume_all(bootstrap, summary.topics)


@pytest.fixture(scope="module")
def client(registry_url):
    return SchemaRegistryClient({"url": registry_url})


def writer_type(client, msg) -> str | None:
    """The writer's message type named by the record's schema id/GUID and indexes (None:
    the framing or the schema reference is broken)."""
    headers = msg.headers() or []
    ctx = SerializationContext(msg.topic(), MessageField.VALUE, headers)
    sid = SchemaId("PROTOBUF")
    try:
        dual_schema_id_deserializer(msg.value(), ctx, sid)
        if sid.guid is not None:
            schema = client.get_schema_by_guid(str(sid.guid), fmt="serialized")
        else:
            schema = client.get_schema(sid.id, fmt="serialized")
        return message_name_at(schema.schema_str, sid.message_indexes)
    except Exception:  # noqa: BLE001 - any failure means "not a decodable record"
        return None


def test_topics_hold_what_the_summary_says(produced, client):
    summary, messages = produced
    assert len(messages) == summary.records == RECORDS
    assert dict(Counter(m.topic() for m in messages)) == summary.per_topic
    types: dict[str, Counter] = defaultdict(Counter)
    poison_by_topic = Counter()
    unreadable_poison = 0
    for m in messages:
        name = writer_type(client, m)
        if m.key().startswith(b"poison-"):  # the generator's key for poison records
            poison_by_topic[m.topic()] += 1
            unreadable_poison += name is None
        else:
            assert name is not None, (m.topic(), m.partition(), m.offset())
            types[m.topic()][name] += 1
    assert {t: dict(c) for t, c in types.items()} == summary.per_topic_message_type
    assert dict(poison_by_topic) == summary.poison_by_topic
    # Only a corrupt payload names a registered schema and message; every other poison kind
    # already fails at the framing or at the registry.
    assert unreadable_poison == summary.poison - summary.poison_by_kind["corrupt_payload"]


def test_well_formed_records_deserialize_with_confluents_deserializer(produced, client, tmp_path):
    summary, messages = produced
    versions = load_schema_versions(tmp_path)
    deserializers: dict[str, ProtobufDeserializer] = {}
    good = Counter()
    failed = Counter()
    for m in messages:
        name = writer_type(client, m)
        # Version 2 reads both versions of the order types (it only adds fields).
        cls_name = name or "shop.v1.StockLevel"
        des = deserializers.get(cls_name)
        if des is None:
            des = ProtobufDeserializer(
                versions["v2"].message_class(cls_name),
                {"schema.id.deserializer": dual_schema_id_deserializer},
                schema_registry_client=client,
            )
            deserializers[cls_name] = des
        ctx = SerializationContext(m.topic(), MessageField.VALUE, m.headers() or [])
        try:
            obj = des(m.value(), ctx)
        except Exception:  # noqa: BLE001 - poison records fail in many ways; all are failures
            failed[m.topic()] += 1
            continue
        good[name] += 1
        assert obj.DESCRIPTOR.full_name == name
        if name == "shop.v1.Order":
            assert obj.order_id.startswith("ord-") and len(obj.line_items) >= 1
        elif name == "shop.v1.Customer":
            assert obj.customer_id.startswith("cus-") and obj.full_name
    assert dict(good) == summary.per_message_type
    assert dict(failed) == summary.poison_by_topic


def test_customer_keys_deserialize_and_match_the_value(produced, client, tmp_path):
    summary, messages = produced
    versions = load_schema_versions(tmp_path)
    key_des = ProtobufDeserializer(
        versions["v1"].message_class("shop.v1.CustomerKey"), {}, schema_registry_client=client
    )
    value_des = ProtobufDeserializer(
        versions["v1"].message_class("shop.v1.Customer"), {}, schema_registry_client=client
    )
    topic = f"{summary.topic_prefix}customers"
    matched = 0
    for m in messages:
        if m.topic() != topic or m.key().startswith(b"poison-"):
            continue
        key = key_des(m.key(), SerializationContext(topic, MessageField.KEY))
        value = value_des(m.value(), SerializationContext(topic, MessageField.VALUE))
        assert key.customer_id == value.customer_id
        matched += 1
    assert matched == summary.framed_keys > 0


def test_header_records_carry_only_the_guid_header(produced):
    summary, messages = produced
    with_header = [m for m in messages if m.headers() and not m.key().startswith(b"poison-")]
    assert len(with_header) == summary.header_framed > 0
    for m in with_header:
        assert m.topic() == f"{summary.topic_prefix}inventory"
        ((name, value),) = m.headers()
        assert name == VALUE_SCHEMA_ID_HEADER and value[0] == 1
        assert str(uuid.UUID(bytes=value[1:17])) in {
            g for gs in summary.schema_guids_by_type.values() for g in gs
        }


def test_subjects_references_and_the_evolution_are_registered(produced, client):
    summary, _ = produced
    p = summary.topic_prefix
    subjects = set(client.get_subjects())
    assert {
        f"{p}orders-value",
        f"{p}order_lines-value",
        f"{p}customers-value",
        f"{p}customers-key",
        f"{p}inventory-shop.v1.StockLevel",
        f"{p}inventory-shop.v1.StockMovement",
        "shop/common.proto",
    } <= subjects
    assert client.get_versions(f"{p}orders-value") == [1, 2]
    v1 = client.get_version(f"{p}orders-value", 1)
    v2 = client.get_version(f"{p}orders-value", 2)
    assert [r.name for r in v2.schema.references] == ["shop/common.proto"]
    assert "sales_channel" in v2.schema.schema_str and "sales_channel" not in v1.schema.schema_str
    assert sorted({v1.schema_id, v2.schema_id}) == summary.schema_ids_by_type["shop.v1.Order"]
    assert summary.order_schema_versions["v1"] > 0 and summary.order_schema_versions["v2"] > 0


def test_codec_gives_each_poison_record_the_promised_reason(produced, registry_url):
    summary, messages = produced
    decoder = Decoder(open_registry(registry_url))
    reason_of_kind = {k.name: k.reason_code for k in POISON_KINDS}
    decoded, reasons = Counter(), Counter()
    for m in messages:
        try:
            record = decoder.decode(m.value(), m.headers() or None)
        except CodecError as exc:
            assert exc.record_fault, exc
            reasons[exc.code] += 1
            continue
        decoded[record.message_type] += 1
    assert dict(decoded) == summary.per_message_type
    assert dict(reasons) == summary.poison_by_reason
    assert set(reasons) <= set(reason_of_kind.values())
