"""The demo shop's messages: orders, order lines, status changes, customers and stock.

:class:`ShopGenerator` fills the message classes of one schema version
(:class:`pipelines.demo.schemas.SchemaVersion`) with plausible values. Every value comes from
the one seeded ``random.Random`` it is given, so equal seeds give equal messages; only what
version 2 of the order file adds differs between versions. A few values break the demo's
data-quality rules on purpose (line-item quantities out of range, malformed e-mails).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message

from pipelines.demo.schemas import SchemaVersion

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


class ShopGenerator:
    """Builds the shop's messages; all randomness comes from one seeded ``random.Random``."""

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
