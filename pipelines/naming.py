"""Silver table names, derived from a fully-qualified Protobuf message name.

The rule (stable: it depends on the message name only, never on arrival order or on which
other types exist; collision-free: two different names never share a table):

    table = slug(full_name) + "_" + hex8(sha256(full_name))

- ``slug``: the full name (package and nested message path) lowercased, every run of
  characters outside ``[a-z0-9]`` (the dots, underscores) replaced by one ``_``, trimmed, and
  cut to 100 characters; it makes the name readable (``shop.v1.Order.LineItem`` ->
  ``shop_v1_order_lineitem``) but is lossy (case, ``.`` versus ``_``).
- ``hex8``: the first 8 hex digits of the SHA-256 of the exact full name (UTF-8). It tells
  apart names the slug merges (``shop.v1.Order`` / ``shop.v1_Order`` / ``shop.v1.ORDER``),
  so nested types, case variants and dotted versus underscored names all get their own table.

Examples::

    shop.v1.Order            -> shop_v1_order_<8 hex>
    shop.v1.Order.LineItem   -> shop_v1_order_lineitem_<8 hex>   (its own table)

The result matches ``[a-z0-9_]+``, so it is a valid unquoted Spark/Hive identifier and a
plain directory name (``lakehouse/silver/<table>``) that any engine can read by path. The
silver writer also stores the full name in the table property ``protolake.message_type`` and
refuses to write a different type into an existing table (which would need a SHA-256 prefix
collision), so a collision could never mix two types silently.
"""

from __future__ import annotations

import hashlib
import re

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_FULL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
MAX_SLUG = 100
MESSAGE_TYPE_PROPERTY = "protolake.message_type"
#: Table property of bronze and silver tables: the Kafka topics their records came from
#: (comma-separated, sorted).
KAFKA_TOPICS_PROPERTY = "protolake.kafka_topics"


def table_name_for(full_name: str) -> str:
    """Return the silver table name for a fully-qualified message name.

    Raises:
        ValueError: ``full_name`` is not a dotted Protobuf name (a leading ``.`` is accepted).
    """
    name = full_name[1:] if full_name.startswith(".") else full_name
    if not _FULL_NAME.fullmatch(name):
        raise ValueError(f"not a fully-qualified Protobuf message name: {full_name!r}")
    slug = _NOT_ALNUM.sub("_", name.lower()).strip("_")[:MAX_SLUG].rstrip("_") or "message"
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{slug}_{digest}"


def bronze_table_of_topic(topic: str) -> str:
    """The bronze table a topic lands in (per-topic mode), as docs/contracts.md defines it."""
    return re.sub(r"[^A-Za-z0-9_]", "_", topic).lower()


def bronze_query_name(table_mode: str, single_table: str) -> str:
    """The name of bronze's query (and of its checkpoint folder) for a table mode: switching
    modes starts a fresh query instead of resuming offsets written to other tables."""
    return "per_topic" if table_mode == "per_topic" else single_table
