"""The demo stream, generated offline against confluent-kafka's mock registry: schemas,
determinism, and that its summary counts what it generated (recounted here from the bytes)."""

from __future__ import annotations

import re
import struct
import uuid
from collections import Counter

import pytest
from google.protobuf import descriptor_pb2

from codec import CodecError, parse_frame
from pipelines.demo.schemas import compile_demo_schemas
from pipelines.demo.stream import (
    DQ_EMAIL,
    DQ_QUANTITY,
    EMAIL_PATTERN,
    POISON_KINDS,
    QUANTITY_RANGE,
    TOPIC_SUFFIXES,
    VALUE_SCHEMA_ID_HEADER,
    DemoStreamSummary,
)
from pipelines.naming import table_name_for

# Poison kinds the framing layer alone must reject (the others need the registry or the schema).
FRAMING_KINDS = {"wrong_magic", "truncated_frame", "plain_json", "empty_value"}


def _files(fds: bytes) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    return {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(fds).file}


def test_schemas_compile_with_imports_and_the_map_entry_before_line_item(tmp_path):
    sets = compile_demo_schemas(tmp_path)
    assert set(sets) == {"v1", "v2"}
    for version, fds in sets.items():
        files = _files(fds)
        assert {
            "google/protobuf/timestamp.proto",
            "shop/common.proto",
            "shop/v1/order.proto",
            "shop/v1/customer.proto",
            "shop/v1/inventory.proto",
        } <= set(files), version
        order = files["shop/v1/order.proto"].message_type[0]
        assert order.name == "Order"
        nested = [m.name for m in order.nested_type]
        # The map entry protoc synthesizes comes first, so LineItem's indexes are [0, 1].
        assert nested[:2] == ["AttributesEntry", "LineItem"], nested
        assert files["shop/v1/inventory.proto"].syntax in ("proto2", "")
    # Cached: a second call reads the same bytes back without protoc.
    assert compile_demo_schemas(tmp_path) == sets


def _fields(msg: descriptor_pb2.DescriptorProto, prefix: str = "") -> dict[str, tuple]:
    out = {}
    for f in msg.field:
        out[f"{prefix}{msg.name}.{f.name}"] = (
            f.number,
            f.type,
            f.label,
            f.type_name,
            f.oneof_index if f.HasField("oneof_index") else None,
        )
    for n in msg.nested_type:
        out.update(_fields(n, f"{prefix}{msg.name}."))
    return out


def test_order_v2_is_a_compatible_evolution_of_v1(tmp_path):
    sets = compile_demo_schemas(tmp_path)
    v1 = _files(sets["v1"])["shop/v1/order.proto"]
    v2 = _files(sets["v2"])["shop/v1/order.proto"]
    f1 = {k: v for m in v1.message_type for k, v in _fields(m).items()}
    f2 = {k: v for m in v2.message_type for k, v in _fields(m).items()}
    # Every field of v1 is in v2 unchanged (number, type, label, message type, oneof) ...
    assert {k: f2.get(k) for k in f1} == f1
    # ... v2 adds fields, and no number is reused within a message.
    added = set(f2) - set(f1)
    assert {"Order.sales_channel", "Order.tags", "Order.LineItem.discount_pct"} <= added
    for msg in {k.rsplit(".", 1)[0] for k in f2}:
        numbers = [v[0] for k, v in f2.items() if k.rsplit(".", 1)[0] == msg]
        assert len(numbers) == len(set(numbers)), msg
    # Top-level message order is kept, so the message indexes of v1 types still hold in v2.
    assert [m.name for m in v2.message_type][: len(v1.message_type)] == [
        m.name for m in v1.message_type
    ]


def test_same_seed_same_stream_other_seed_other_stream(stream_factory):
    def shape(records):
        # GUIDs of the mock registry are random; everything else must be equal.
        return [
            (
                r.topic,
                r.key,
                r.value,
                [(k, v[:1] + v[17:]) for k, v in r.headers],
                r.message_type,
                r.poison,
            )
            for r in records
        ]

    a, sa = stream_factory(records=400, seed=3, poison_every=20)
    b, sb = stream_factory(records=400, seed=3, poison_every=20)
    c, _ = stream_factory(records=400, seed=4, poison_every=20)
    assert shape(a) == shape(b)
    assert sa.summary.per_message_type == sb.summary.per_message_type
    assert shape(a) != shape(c)


def test_summary_counts_what_was_generated(demo_stream):
    records, stream = demo_stream
    s = stream.summary
    assert s.records == len(records) == 1200
    assert s.topics == [f"unit.{t}" for t in TOPIC_SUFFIXES]
    assert s.per_topic == dict(Counter(r.topic for r in records))
    good = [r for r in records if r.poison is None]
    assert s.per_message_type == dict(Counter(r.message_type for r in good))
    for topic, counts in s.per_topic_message_type.items():
        assert counts == dict(Counter(r.message_type for r in good if r.topic == topic))
    poison = [r for r in records if r.poison is not None]
    assert len(poison) == 1200 // 25 == s.poison
    assert s.poison_by_kind == dict(Counter(r.poison for r in poison))
    reason_of = {k.name: k.reason_code for k in POISON_KINDS}
    assert s.poison_by_reason == dict(Counter(reason_of[r.poison] for r in poison))
    assert s.poison_by_topic == dict(sorted(Counter(r.topic for r in poison).items()))
    assert set(s.poison_by_kind) == {k.name for k in POISON_KINDS}, "every kind occurs"
    assert s.header_framed == sum(1 for r in good if r.headers)
    assert s.framed_keys == sum(1 for r in good if r.topic == "unit.customers")
    assert s.well_formed == len(good)


def test_topics_carry_the_documented_types_and_indexes(demo_stream):
    records, _ = demo_stream
    seen: dict[tuple[str, str], set[tuple[int, ...]]] = {}
    for r in records:
        if r.poison is not None:
            continue
        frame = parse_frame(r.value, r.headers)
        seen.setdefault((r.topic, r.message_type), set()).add(frame.message_indexes)
        if r.headers:
            assert frame.source == "header" and frame.schema_guid is not None
            assert r.topic == "unit.inventory"
        else:
            assert frame.source == "prefix" and frame.schema_id is not None
    assert seen == {
        ("unit.orders", "shop.v1.Order"): {(0,)},
        ("unit.orders", "shop.v1.OrderStatusChanged"): {(3,)},
        ("unit.order_lines", "shop.v1.Order.LineItem"): {(0, 1)},
        ("unit.customers", "shop.v1.Customer"): {(0,)},
        ("unit.inventory", "shop.v1.StockLevel"): {(0,)},
        ("unit.inventory", "shop.v1.StockMovement"): {(1,)},
    }


def test_customer_keys_are_framed_customer_keys(demo_stream, schema_versions):
    records, _ = demo_stream
    key_cls = schema_versions["v1"].message_class("shop.v1.CustomerKey")
    value_cls = schema_versions["v1"].message_class("shop.v1.Customer")
    checked = 0
    for r in records:
        if r.topic != "unit.customers" or r.poison is not None:
            continue
        kf = parse_frame(r.key, is_key=True)
        vf = parse_frame(r.value)
        assert kf.message_indexes == (1,)
        key = key_cls.FromString(r.key[kf.payload_offset :])
        value = value_cls.FromString(r.value[vf.payload_offset :])
        assert key.customer_id == value.customer_id
        checked += 1
    assert checked > 50


def test_schema_evolves_halfway(demo_stream, schema_versions):
    records, stream = demo_stream
    ids = [
        struct.unpack(">I", r.value[1:5])[0]
        for r in records
        if r.poison is None and r.message_type == "shop.v1.Order"
    ]
    first, second = ids[: len(ids) // 4], ids[-(len(ids) // 4) :]
    assert len(set(first)) == 1 and len(set(second)) == 1 and set(first) != set(second)
    assert stream.summary.schema_ids_by_type["shop.v1.Order"] == sorted(set(ids))
    v2 = schema_versions["v2"].message_class("shop.v1.Order")
    late = [r for r in records if r.message_type == "shop.v1.Order"][-20:]
    # Version 2 fields are filled in the second half.
    assert any(
        v2.FromString(r.value[parse_frame(r.value).payload_offset :]).sales_channel for r in late
    )
    assert sum(stream.summary.order_schema_versions.values()) == sum(
        1 for r in records if r.poison is None and r.topic in ("unit.orders", "unit.order_lines")
    )


def test_framing_poison_gets_the_expected_codec_code(demo_stream):
    records, _ = demo_stream
    expected = {k.name: k.reason_code for k in POISON_KINDS}
    checked = Counter()
    for r in records:
        if r.poison not in FRAMING_KINDS:
            continue
        with pytest.raises(CodecError) as err:
            parse_frame(r.value, r.headers)
        assert err.value.code == expected[r.poison], r.poison
        checked[r.poison] += 1
    assert set(checked) == FRAMING_KINDS


def test_registry_poison_is_well_framed_but_names_nothing_registered(demo_stream):
    records, stream = demo_stream
    known_ids = {i for ids in stream.summary.schema_ids_by_type.values() for i in ids}
    known_guids = {g for gs in stream.summary.schema_guids_by_type.values() for g in gs}
    kinds = Counter()
    for r in records:
        if r.poison == "unknown_schema_id":
            frame = parse_frame(r.value, r.headers)
            assert frame.schema_id not in known_ids
        elif r.poison == "unknown_schema_guid":
            frame = parse_frame(r.value, r.headers)
            assert frame.source == "header" and frame.schema_guid not in known_guids
            assert str(uuid.UUID(frame.schema_guid)) == frame.schema_guid
        elif r.poison == "corrupt_payload":
            frame = parse_frame(r.value, r.headers)
            assert frame.schema_id in known_ids
        else:
            continue
        kinds[r.poison] += 1
    assert set(kinds) == {"unknown_schema_id", "unknown_schema_guid", "corrupt_payload"}


def test_dq_violations_are_counted_from_the_generated_values(demo_stream, schema_versions):
    records, stream = demo_stream
    classes = {n: v.message_class for n, v in schema_versions.items()}
    bad_qty = bad_email = 0
    for r in records:
        if r.poison is not None:
            continue
        frame = parse_frame(r.value, r.headers)
        payload = r.value[frame.payload_offset :]
        if r.message_type == "shop.v1.Order.LineItem":
            q = classes["v2"]("shop.v1.Order.LineItem").FromString(payload).quantity
            bad_qty += not QUANTITY_RANGE[0] <= q <= QUANTITY_RANGE[1]
        elif r.message_type == "shop.v1.Customer":
            email = classes["v1"]("shop.v1.Customer").FromString(payload).email
            bad_email += re.fullmatch(EMAIL_PATTERN, email) is None
    assert stream.summary.dq_violations == {DQ_QUANTITY: bad_qty, DQ_EMAIL: bad_email}
    # The stream violates both rules, but only a little.
    assert 0 < bad_qty < 0.1 * stream.summary.per_message_type["shop.v1.Order.LineItem"]
    assert 0 < bad_email < 0.1 * stream.summary.per_message_type["shop.v1.Customer"]


def test_the_part_on_some_topics_counts_what_was_generated_there(demo_stream):
    records, stream = demo_stream
    s = stream.summary
    reason_of = {k.name: k.reason_code for k in POISON_KINDS}
    for chosen in ([s.topics[0]], [s.topics[2]], [s.topics[1], s.topics[3]], s.topics):
        part = s.on_topics(chosen)
        mine = [r for r in records if r.topic in chosen]
        good = [r for r in mine if r.poison is None]
        assert part.records == len(mine) > 0
        assert part.per_topic == dict(Counter(r.topic for r in mine))
        assert part.well_formed == len(good)
        assert part.per_message_type == dict(Counter(r.message_type for r in good))
        tables = Counter(table_name_for(str(r.message_type)) for r in good)
        assert part.silver_rows_by_table(quarantine_rules=()) == dict(tables)
        lines = table_name_for("shop.v1.Order.LineItem")
        if lines in tables:  # the quantity rule's rows leave the line items' table
            tables[lines] -= part.dq_violations[DQ_QUANTITY]
        assert part.silver_rows_by_table() == dict(tables)
        poison = Counter(reason_of[r.poison] for r in mine if r.poison is not None)
        assert part.expected_quarantine_by_reason(()) == dict(poison)
    # data-quality violations stay with the topic of the type they are about
    assert s.on_topics(s.topics).dq_violations == s.dq_violations
    lines, customers = s.on_topics(["unit.order_lines"]), s.on_topics(["unit.customers"])
    assert lines.dq_violations == {DQ_QUANTITY: s.dq_violations[DQ_QUANTITY]}
    assert customers.dq_violations == {DQ_EMAIL: s.dq_violations[DQ_EMAIL]}
    assert lines.expected_quarantine_by_reason()["DQ_FAILED"] == s.dq_violations[DQ_QUANTITY]
    assert "DQ_FAILED" not in customers.expected_quarantine_by_reason()
    with pytest.raises(ValueError, match="not topics of this stream"):
        s.on_topics(["unit.nowhere"])


def test_unsigned_64_bit_values_above_the_signed_range_occur(schema_versions, stream_factory):
    records, _ = stream_factory(records=2000, seed=7, poison_every=0)
    cls = schema_versions["v2"].message_class("shop.v1.Order")
    points = [
        cls.FromString(r.value[parse_frame(r.value).payload_offset :]).loyalty_points
        for r in records
        if r.message_type == "shop.v1.Order"
    ]
    assert any(p >= 2**63 for p in points)


def test_expected_quarantine_adds_dq_failures_of_quarantine_rules_only(demo_stream):
    s = demo_stream[1].summary
    with_dq = s.expected_quarantine_by_reason()
    assert with_dq["DQ_FAILED"] == s.dq_violations[DQ_QUANTITY]
    assert {k: v for k, v in with_dq.items() if k != "DQ_FAILED"} == s.poison_by_reason
    assert s.expected_quarantine_by_reason(()) == s.poison_by_reason
    again = DemoStreamSummary.from_dict(s.to_dict())
    assert again == s


def test_no_poison_when_poison_every_is_zero(stream_factory):
    records, stream = stream_factory(records=100, seed=1, poison_every=0)
    assert all(r.poison is None for r in records)
    assert stream.summary.poison == 0 and stream.summary.records == 100


def test_headers_use_confluents_header_name(demo_stream):
    records, _ = demo_stream
    header_records = [r for r in records if r.headers and r.poison is None]
    assert header_records
    for r in header_records:
        assert [k for k, _ in r.headers] == [VALUE_SCHEMA_ID_HEADER]
        assert r.headers[0][1][0] == 1  # magic byte of the GUID form
