"""Produce the demo shop's stream: real Confluent-framed Protobuf on a real Kafka broker.

Contract of :func:`produce_demo_stream`:

- Topics ``<prefix>orders``, ``<prefix>order_lines``, ``<prefix>customers`` and
  ``<prefix>inventory`` are created first (3 partitions each; existing topics are kept).
- Records are serialized with confluent-kafka's own ``ProtobufSerializer`` against the schema
  registry at ``registry_url`` (auto-registration, references registered under their file
  name, e.g. ``shop/common.proto``) and sent with confluent-kafka's ``Producer``
  (idempotent, ``acks=all``). What the stream contains, per topic:

  ===================  =====================================  ===========================
  topic                value types (message indexes)          subject name strategy, extras
  ===================  =====================================  ===========================
  orders               shop.v1.Order [0],                     TopicNameStrategy; the file
                       shop.v1.OrderStatusChanged [3]         evolves from v1 to v2 halfway
  order_lines          shop.v1.Order.LineItem [0, 1] (nested;  TopicNameStrategy; evolves too
                       the map entry comes first)
  customers            shop.v1.Customer [0]                   TopicNameStrategy; keys framed
                                                              as shop.v1.CustomerKey [1]
  inventory            shop.v1.StockLevel [0],                TopicRecordNameStrategy; half
                       shop.v1.StockMovement [1] (proto2)     the records carry the schema
                                                              GUID in a header instead
  ===================  =====================================  ===========================

- Record ``i`` (0-based) is a poison record when ``poison_every`` divides ``i + 1``; the k-th
  poison record is of kind ``POISON_KINDS[k % 7]`` on topic ``k % 4`` (see :data:`POISON_KINDS`
  for the kinds and the quarantine reason code each one must get).
- Order types are written with schema version 1 for records ``i < records // 2`` and with the
  evolved version 2 (``demo_schemas/evolved``) after that.
- A few records violate the demo's data-quality expectations on purpose (line-item quantity
  outside ``QUANTITY_RANGE``, customer e-mail not matching ``EMAIL_PATTERN``); they are
  counted in :attr:`DemoStreamSummary.dq_violations`.
- The content, keys, order and partitions of the records are a function of ``seed`` alone
  (keys are hashed by librdkafka's default partitioner); only Kafka timestamps, offsets and
  registry ids depend on the environment.

Schemas are compiled at run time with ``grpc_tools.protoc`` into descriptor sets cached under
``infra/.cache/demo_schemas/<hash>/`` (``PROTOLAKE_CACHE_DIR`` overrides ``infra/.cache``), and
message classes are built from them in one ``DescriptorPool`` per schema version: versions 1
and 2 of ``shop/v1/order.proto`` declare the same names, so generated ``_pb2`` modules, which
all share protobuf's default pool, could not hold both in one process.

Raises :class:`DemoStreamError` when the broker or the registry refuses a record.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

SCHEMA_DIR = Path(__file__).resolve().parent / "demo_schemas"
EVOLVED_SCHEMA_DIR = SCHEMA_DIR / "evolved"
REPO_ROOT = Path(__file__).resolve().parent.parent

#: Topic names without the prefix, in the order poison records are spread over them.
TOPIC_SUFFIXES: tuple[str, ...] = ("orders", "order_lines", "customers", "inventory")
PARTITIONS = 3

#: The .proto files compiled for each schema version (imports come along).
PROTO_FILES: tuple[str, ...] = (
    "shop/v1/order.proto",
    "shop/v1/customer.proto",
    "shop/v1/inventory.proto",
)

#: Data-quality rules the stream violates on purpose (pipelines/demo.toml declares them).
QUANTITY_RANGE: tuple[int, int] = (1, 100)
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"
DQ_QUANTITY = "shop.v1.Order.LineItem.quantity between 1 and 100"
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
    """What :func:`produce_demo_stream` produced, for comparison with the lakehouse.

    ``per_message_type`` counts well-formed value records by fully-qualified type (poison
    records are not in it); ``poison_by_reason`` counts poison records by the reason code the
    pipeline must quarantine them with; ``dq_violations`` counts well-formed records that break
    one of the demo's data-quality rules (by rule label, see ``DQ_QUANTITY``/``DQ_EMAIL``).
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
        expected = dict(self.poison_by_reason)
        dq = sum(self.dq_violations.get(rule, 0) for rule in quarantine_rules)
        if dq:
            expected["DQ_FAILED"] = expected.get("DQ_FAILED", 0) + dq
        return expected

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


# -- schemas -------------------------------------------------------------------------------


def _protoc_include() -> Path:
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def _cache_root() -> Path:
    base = os.environ.get("PROTOLAKE_CACHE_DIR") or str(REPO_ROOT / "infra" / ".cache")
    return Path(base) / "demo_schemas"


def _schema_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(SCHEMA_DIR.rglob("*.proto")):
        digest.update(str(path.relative_to(SCHEMA_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def compile_demo_schemas(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, bytes]:
    """Compile the demo's .proto files with protoc; return serialized FileDescriptorSets.

    Returns ``{"v1": ..., "v2": ...}``; each set holds every demo file and its imports
    (``--include_imports``). The sets are cached by a hash of the .proto sources.

    Raises:
        DemoStreamError: protoc failed (its message is included).
    """
    root = Path(cache_dir) if cache_dir is not None else _cache_root()
    folder = root / _schema_hash()
    includes = {
        "v1": [SCHEMA_DIR],
        # The evolved order.proto shadows version 1; everything else comes from SCHEMA_DIR.
        "v2": [EVOLVED_SCHEMA_DIR, SCHEMA_DIR],
    }
    out: dict[str, bytes] = {}
    for version, paths in includes.items():
        target = folder / f"{version}.pb"
        if not target.exists():
            folder.mkdir(parents=True, exist_ok=True)
            # Write to a temporary name and rename: parallel runs must never read half a file.
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            os.close(fd)
            args = [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                *(f"-I{p}" for p in paths),
                f"-I{_protoc_include()}",
                "--include_imports",
                f"--descriptor_set_out={tmp}",
                *PROTO_FILES,
            ]
            proc = subprocess.run(args, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                Path(tmp).unlink(missing_ok=True)
                raise DemoStreamError(f"protoc failed for schema {version}: {proc.stderr.strip()}")
            os.replace(tmp, target)
        out[version] = target.read_bytes()
    return out


class SchemaVersion:
    """The demo's message classes of one schema version, in a pool of their own."""

    def __init__(self, name: str, descriptor_set: bytes) -> None:
        self.name = name
        self.pool = descriptor_pool.DescriptorPool()
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        for file_proto in fds.file:
            self.pool.Add(file_proto)
        self._classes: dict[str, type[Message]] = {}

    def message_class(self, full_name: str) -> type[Message]:
        """The generated class of a fully-qualified message type."""
        cls = self._classes.get(full_name)
        if cls is None:
            cls = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))
            self._classes[full_name] = cls
        return cls


def load_schema_versions(
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, SchemaVersion]:
    """Compile (or reuse) the demo schemas; return ``{"v1": ..., "v2": ...}``."""
    return {name: SchemaVersion(name, fds) for name, fds in compile_demo_schemas(cache_dir).items()}


# -- record generation ---------------------------------------------------------------------

_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Linus")
_LAST = (
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Allen",
    "Thompson",
    "Perlman",
)
_CITIES = (
    ("Berlin", "DE", "10115"),
    ("Lyon", "FR", "69001"),
    ("Leeds", "GB", "LS1 1UR"),
    ("Porto", "PT", "4000-322"),
    ("Austin", "US", "73301"),
    ("Osaka", "JP", "530-0001"),
)
_CURRENCY = {"DE": 1, "FR": 1, "PT": 1, "GB": 3, "US": 2, "JP": 4}
_WAREHOUSES = ("BER-1", "LYS-2", "LBA-1", "AUS-3")
_CHANNELS = ("web", "app", "store", "marketplace")
_CARRIERS = ("DHL", "UPS", "La Poste", "Yamato")
_PRODUCTS = ("kettle", "teapot", "mug", "grinder", "scale", "filter", "tin", "tray")
_BASE_TIME = int(datetime(2026, 1, 5, 8, 0, tzinfo=UTC).timestamp())


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


class _Generator:
    """Builds the demo records; all randomness comes from one seeded ``random.Random``."""

    def __init__(self, rng: random.Random, versions: Mapping[str, SchemaVersion]) -> None:
        self.rng = rng
        self.versions = versions
        self.order_seq = 0

    def _ts(self, msg: Any, i: int) -> None:
        msg.seconds = _BASE_TIME + i * 7 + self.rng.randrange(5)
        msg.nanos = self.rng.randrange(1000) * 1_000_000

    def _money(self, msg: Any, currency: int, cents: int) -> None:
        msg.currency = currency
        msg.units = cents // 100
        msg.nanos = (cents % 100) * 10_000_000

    def _address(self, msg: Any) -> str:
        city, country, postal = self.rng.choice(_CITIES)
        msg.line1 = f"{self.rng.randrange(1, 200)} {self.rng.choice(_LAST)} Street"
        if self.rng.random() < 0.3:
            msg.line2 = f"Flat {self.rng.randrange(1, 40)}"
        msg.city = city
        msg.postal_code = postal
        msg.country_code = country
        return country

    def customer_id(self) -> str:
        return f"cus-{self.rng.randrange(1, 400):05d}"

    def sku(self) -> str:
        return f"SKU-{self.rng.randrange(1, 250):05d}"

    def line_item(self, version: SchemaVersion, msg: Any, order_id: str, n: int) -> int:
        msg.order_id = order_id
        msg.line_number = n
        msg.sku = self.sku()
        msg.quantity = self.rng.choice((1, 1, 1, 2, 2, 3, 4, 6, 12))
        self._money(msg.unit_price, self.rng.choice((1, 2, 3)), self.rng.randrange(199, 25_000))
        if version.name == "v2":
            msg.product_name = self.rng.choice(_PRODUCTS)
            if self.rng.random() < 0.25:
                msg.discount_pct = self.rng.choice((5.0, 10.0, 12.5, 25.0))
        return int(msg.quantity)

    def order(self, version: SchemaVersion, i: int) -> tuple[str, Message]:
        cls = version.message_class("shop.v1.Order")
        msg: Any = cls()
        self.order_seq += 1
        order_id = f"ord-{self.order_seq:06d}"
        msg.order_id = order_id
        msg.customer_id = self.customer_id()
        self._ts(msg.created_at, i)
        msg.status = self.rng.randrange(1, 6)
        if self.rng.random() < 0.5:
            msg.attributes["campaign"] = self.rng.choice(("spring", "blackfriday", "none"))
        if self.rng.random() < 0.2:
            msg.attributes["gift_wrap"] = "true"
        country = self._address(msg.shipping_address)
        currency = _CURRENCY[country]
        total = 0
        for n in range(1, self.rng.randrange(1, 5) + 1):
            item = msg.line_items.add()
            qty = self.line_item(version, item, order_id, n)
            item.unit_price.currency = currency
            total += qty * (item.unit_price.units * 100 + item.unit_price.nanos // 10_000_000)
        payment = self.rng.random()
        if payment < 0.6:
            msg.card.network = self.rng.choice(("visa", "mastercard", "amex"))
            msg.card.last4 = f"{self.rng.randrange(10_000):04d}"
            msg.card.auth_code = f"A{self.rng.randrange(16**6):06X}"
        elif payment < 0.85:
            msg.bank_transfer.iban = f"DE{self.rng.randrange(10**20):020d}"
            msg.bank_transfer.reference = order_id
        elif payment < 0.95:
            msg.voucher_code = f"VOUCH-{self.rng.randrange(10**6):06d}"
        # else: no payment case set (an order awaiting payment)
        # Loyalty points: now and then above 2^63, which a signed 64-bit column would wrap.
        if self.rng.random() < 0.03:
            msg.loyalty_points = 2**63 + self.rng.randrange(10**6)
        else:
            msg.loyalty_points = total // 100
        if self.rng.random() < 0.15:
            msg.coupon_code = self.rng.choice(
                ("", "WELCOME10", "FREESHIP")
            )  # "" is set, not absent
        if version.name == "v2":
            msg.sales_channel = self.rng.choice(_CHANNELS)
            msg.tags.extend(
                self.rng.sample(("priority", "b2b", "fragile", "repeat"), self.rng.randrange(3))
            )
            shipping = self.rng.choice((0, 490, 990))
            self._money(msg.shipping_cost, currency, shipping)
            total += shipping
            if msg.status in (3, 4):
                shipment = msg.shipments.add()
                shipment.carrier = self.rng.choice(_CARRIERS)
                shipment.tracking_code = f"TRK{self.rng.randrange(10**9):09d}"
                self._ts(shipment.shipped_at, i + 3600)
        self._money(msg.total, currency, total)
        return order_id, msg

    def status_changed(self, version: SchemaVersion, i: int) -> tuple[str, Message]:
        msg: Any = version.message_class("shop.v1.OrderStatusChanged")()
        order_id = f"ord-{self.rng.randrange(1, max(self.order_seq, 1) + 1):06d}"
        msg.order_id = order_id
        old = self.rng.randrange(1, 5)
        msg.old_status = old
        new_max = 7 if version.name == "v2" else 6  # RETURNED (6) exists from version 2 on
        msg.new_status = self.rng.randrange(old + 1, new_max)
        self._ts(msg.changed_at, i)
        if self.rng.random() < 0.3:
            msg.reason = self.rng.choice(("customer request", "payment received", "carrier scan"))
        if version.name == "v2":
            msg.changed_by = self.rng.choice(("system", "user-17", "user-42"))
        return order_id, msg

    def order_line(self, version: SchemaVersion, i: int) -> tuple[str, Message, int]:
        msg: Any = version.message_class("shop.v1.Order.LineItem")()
        order_id = f"ord-{self.rng.randrange(1, max(self.order_seq, 1) + 1):06d}"
        self.line_item(version, msg, order_id, self.rng.randrange(1, 6))
        # Now and then a quantity the quality rule rejects (0, negative, or absurdly large).
        if self.rng.random() < 0.04:
            msg.quantity = self.rng.choice((0, -1, 101, 250, 10_000))
        return order_id, msg, int(msg.quantity)

    def customer(self, version: SchemaVersion, i: int) -> tuple[str, Message, str]:
        msg: Any = version.message_class("shop.v1.Customer")()
        customer_id = self.customer_id()
        first, last = self.rng.choice(_FIRST), self.rng.choice(_LAST)
        msg.customer_id = customer_id
        msg.full_name = f"{first} {last}"
        if self.rng.random() < 0.05:
            # Typed by hand at a till: the e-mail rule (policy warn) flags these.
            msg.email = self.rng.choice(
                (f"{first.lower()}.at.example.com", f"{first} {last}", "n/a")
            )
        else:
            msg.email = f"{first.lower()}.{last.lower()}{self.rng.randrange(100)}@example.com"
        msg.tier = self.rng.randrange(0, 5)
        self._address(msg.billing_address)
        for _ in range(self.rng.randrange(3)):
            self._address(msg.shipping_addresses.add())
        self._ts(msg.created_at, i - 86_400)
        msg.marketing_opt_in = self.rng.random() < 0.4
        if self.rng.random() < 0.6:
            msg.phone = f"+49{self.rng.randrange(10**9, 10**10)}"
        msg.lifetime_value = round(self.rng.uniform(0, 5000), 2)
        msg.avatar_sha256 = hashlib.sha256(customer_id.encode()).digest()
        msg.counters["orders"] = self.rng.randrange(50)
        if self.rng.random() < 0.3:
            msg.counters["returns"] = self.rng.randrange(5)
        return customer_id, msg, str(msg.email)

    def stock_level(self, version: SchemaVersion, i: int) -> tuple[str, Message]:
        msg: Any = version.message_class("shop.v1.StockLevel")()
        msg.sku = self.sku()
        msg.warehouse = self.rng.choice(_WAREHOUSES)
        # proto2 presence: on_hand is absent when not counted yet, reserved when zero.
        if self.rng.random() < 0.9:
            msg.on_hand = self.rng.randrange(0, 500)
        if self.rng.random() < 0.5:
            msg.reserved = self.rng.randrange(0, 20)
        if self.rng.random() < 0.7:
            self._money(msg.unit_cost, 1, self.rng.randrange(50, 9_000))
        if self.rng.random() < 0.05:
            msg.discontinued = True
        self._ts(msg.counted_at, i)
        return str(msg.sku), msg

    def stock_movement(self, version: SchemaVersion, i: int) -> tuple[str, Message]:
        msg: Any = version.message_class("shop.v1.StockMovement")()
        msg.sku = self.sku()
        msg.warehouse = self.rng.choice(_WAREHOUSES)
        reason = self.rng.randrange(1, 6)
        msg.delta = self.rng.randrange(1, 50) * (-1 if reason in (2, 4) else 1)
        msg.reason = reason
        self._ts(msg.moved_at, i)
        if reason == 2:
            msg.order_id = f"ord-{self.rng.randrange(1, max(self.order_seq, 1) + 1):06d}"
        return str(msg.sku), msg


# -- producing -----------------------------------------------------------------------------


def ensure_topics(
    bootstrap: str,
    topics: Iterable[str],
    client_conf: Mapping[str, Any] | None = None,
    partitions: int = PARTITIONS,
) -> None:
    """Create the topics that do not exist yet (replication factor 1).

    Raises:
        DemoStreamError: the broker is unreachable or refuses to create a topic.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_conf or {})})
    try:
        existing = set(admin.list_topics(timeout=10).topics)
    except KafkaException as exc:
        raise DemoStreamError(f"Kafka at {bootstrap} is not reachable: {exc}") from exc
    wanted = [
        NewTopic(t, num_partitions=partitions, replication_factor=1)
        for t in topics
        if t not in existing
    ]
    if not wanted:
        return
    for topic, future in admin.create_topics(wanted, operation_timeout=30).items():
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # created concurrently: fine
            raise DemoStreamError(f"could not create topic {topic}: {exc}") from exc


def _frame_prefix(frame: bytes) -> bytes:
    """Magic byte, schema id and message indexes of a prefix-framed value, payload dropped."""
    # Count the index varints: the count (zigzag), then that many indexes.
    pos = 5
    values: list[int] = []
    while True:
        shift = 0
        value = 0
        while True:
            byte = frame[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append(value)
        count = (values[0] >> 1) ^ -(values[0] & 1)
        if len(values) > count:
            return frame[:pos]


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
        self._gen = _Generator(self._rng, self.versions)
        self._serializers: dict[tuple[str, str, str, bool, bool], Any] = {}
        # A recent well-formed prefix frame and its payload: raw material of poison records.
        self._last_frame = b""
        self._last_payload = b""
        self._per_topic: Counter[str] = Counter()
        self._per_type: Counter[str] = Counter()
        self._per_topic_type: dict[str, Counter[str]] = {t: Counter() for t in self.topics.values()}
        self._poison_kind: Counter[str] = Counter()
        self._poison_reason: Counter[str] = Counter()
        self._poison_topic: Counter[str] = Counter()
        self._order_versions: Counter[str] = Counter()
        self._dq: Counter[str] = Counter({DQ_QUANTITY: 0, DQ_EMAIL: 0})
        self._ids_by_type: dict[str, set[int]] = {}
        self._guids_by_type: dict[str, set[str]] = {}

    # Subject name strategy per topic (module docstring): two types on inventory get a
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
                self._dq[DQ_QUANTITY] += 1
        elif roll < 0.78:
            suffix, version = "customers", versions["v1"]
            ident, msg, email = gen.customer(version, i)
            key_msg: Any = version.message_class("shop.v1.CustomerKey")()
            key_msg.customer_id = ident
            key = self._serialize(suffix, version, key_msg, headers, key=True)
            if not re.fullmatch(EMAIL_PATTERN, email):
                self._dq[DQ_EMAIL] += 1
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
        self._poison_reason[kind.reason_code] += 1
        self._poison_topic[topic] += 1
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
        s.poison_by_reason = dict(sorted(self._poison_reason.items()))
        s.poison_by_topic = dict(sorted(self._poison_topic.items()))
        s.order_schema_versions = dict(sorted(self._order_versions.items()))
        s.schema_ids_by_type = {n: sorted(v) for n, v in sorted(self._ids_by_type.items())}
        s.schema_guids_by_type = {n: sorted(v) for n, v in sorted(self._guids_by_type.items())}
        s.dq_violations = dict(self._dq)


def produce_demo_stream(
    bootstrap: str,
    registry_url: str,
    *,
    topic_prefix: str = "demo.",
    records: int = 3000,
    seed: int = 7,
    poison_every: int = 50,
    registry_conf: Mapping[str, Any] | None = None,
    producer_conf: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> DemoStreamSummary:
    """Create the topics, produce the demo stream (module docstring) and return its summary.

    Args:
        bootstrap: Kafka bootstrap servers.
        registry_url: schema registry URL.
        topic_prefix: prepended to every topic name.
        records: total number of records, poison records included.
        seed: seed of the generator; equal seeds give equal streams.
        poison_every: every n-th record is a poison record (0: none).
        registry_conf: extra ``SchemaRegistryClient`` settings (e.g. ``basic.auth.user.info``).
        producer_conf: extra librdkafka producer settings (e.g. security settings).
        cache_dir: where compiled schemas are cached.

    Raises:
        DemoStreamError: schemas did not compile, or the broker or registry failed.
    """
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient

    versions = load_schema_versions(cache_dir)
    stream_topics = [f"{topic_prefix}{suffix}" for suffix in TOPIC_SUFFIXES]
    ensure_topics(bootstrap, stream_topics, producer_conf)
    client = SchemaRegistryClient.new_client({"url": registry_url, **(registry_conf or {})})
    stream = DemoStream(
        client,
        topic_prefix=topic_prefix,
        records=records,
        seed=seed,
        poison_every=poison_every,
        versions=versions,
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "client.id": "protolake-demo",
            **(producer_conf or {}),
        }
    )
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}: {err}")

    for record in stream:
        while True:
            try:
                producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=cast(Any, record.headers) or None,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.5)  # local queue full: let deliveries drain, then retry
            except KafkaException as exc:
                raise DemoStreamError(f"could not produce to {record.topic}: {exc}") from exc
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise DemoStreamError(f"{remaining} records not delivered to {bootstrap} within 60 s")
    if failures:
        raise DemoStreamError(f"{len(failures)} records failed delivery, first: {failures[0]}")
    return stream.summary
