"""Step 2 of a silver micro-batch: resolve each distinct schema once, on the driver.

Only the distinct schema keys of a batch come to the driver (``codec.SchemaKey``: schema id
or GUID and message indexes; a handful, whatever the number of records). Each is resolved by
``codec.SchemaResolver.resolve_key``, which caches by schema id/GUID across batches, so the
registry is asked once per schema for the life of the job.

The framing pass's distinct keys and counts come as :class:`KeyCounts`; what they resolve to
goes on as :class:`Resolved`.

Contract:

- ``RegistryUnavailable`` propagates: the batch fails, Spark retries it later, and nothing is
  quarantined for an outage.
- Record faults (``UNKNOWN_SCHEMA``, ``NOT_PROTOBUF``, ``SCHEMA_INVALID``,
  ``UNKNOWN_MESSAGE``) become a :class:`Resolution` with ``code``/``stage``/``reason`` set: the
  records carrying that key go to quarantine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codec import CodecError, RegistryUnavailable, SchemaKey, SchemaResolver

from .framing import schema_key_of


@dataclass(frozen=True)
class Resolution:
    """What one schema key resolved to: a message type and its descriptors, or a fault."""

    schema_key: SchemaKey
    message_type: str | None = None
    file_descriptor_set: bytes | None = None
    code: str | None = None
    stage: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is None

    @property
    def schema_id(self) -> int | None:
        return self.schema_key.schema_id

    @property
    def schema_guid(self) -> str | None:
        return self.schema_key.schema_guid

    @property
    def message_indexes(self) -> tuple[int, ...]:
        return self.schema_key.message_indexes

    @property
    def version(self) -> str:
        """The writer schema, ``id:<n>`` or ``guid:<g>``: one schema version of the type."""
        return self.schema_key.version


KeyPair = tuple[SchemaKey | None, SchemaKey | None]


@dataclass(frozen=True)
class KeyCounts:
    """Step 1's result: records per (value schema key, key schema key); a None value key is
    a bad frame, a None key key an unframed (or absent) record key. ``topics``: the Kafka
    topics each value schema key's records came from."""

    counts: dict[KeyPair, int]
    topics: Mapping[SchemaKey, set[str]] = field(default_factory=dict)

    @classmethod
    def of_rows(
        cls,
        rows: Iterable[Any],
        base: Mapping[KeyPair, int] | None = None,
        base_topics: Mapping[SchemaKey, set[str]] | None = None,
    ) -> KeyCounts:
        """From Spark rows of ``_schema_key``, ``_key_schema_key``, ``topic`` and ``count``,
        added to the counts ``base`` and topics ``base_topics`` (the records framed by their
        heads, ``framing.Heads``)."""
        counts: dict[KeyPair, int] = defaultdict(int, base or {})
        topics = {k: set(v) for k, v in (base_topics or {}).items()}
        for r in rows:
            pair = (schema_key_of(r["_schema_key"]), schema_key_of(r["_key_schema_key"]))
            counts[pair] += int(r["count"])
            if pair[0] is not None and r["topic"]:
                topics.setdefault(pair[0], set()).add(r["topic"])
        return cls(dict(counts), topics)

    @property
    def records(self) -> int:
        return sum(self.counts.values())

    @property
    def value_keys(self) -> list[SchemaKey]:
        return sorted({v for v, _ in self.counts if v}, key=SchemaKey.sort_order)

    @property
    def key_keys(self) -> list[SchemaKey]:
        return sorted({k for _, k in self.counts if k}, key=SchemaKey.sort_order)

    @property
    def bad_frames(self) -> bool:
        return any(v is None for v, _ in self.counts)

    def topics_of(self, value_keys: Iterable[SchemaKey]) -> list[str]:
        """The Kafka topics records of ``value_keys`` came from, sorted."""
        return sorted({t for k in value_keys for t in self.topics.get(k, ())})

    def records_of(self, value_keys: Iterable[SchemaKey]) -> int:
        """How many records carry one of ``value_keys``."""
        wanted = set(value_keys)
        return sum(n for (v, _), n in self.counts.items() if v in wanted)

    def per_value_key(self) -> dict[SchemaKey, int]:
        out: dict[SchemaKey, int] = defaultdict(int)
        for (v, _), n in self.counts.items():
            if v is not None:
                out[v] += n
        return out


@dataclass(frozen=True)
class Resolved:
    """Step 2's result: what each value schema key and each key schema key resolved to."""

    values: dict[SchemaKey, Resolution]
    keys: dict[SchemaKey, Resolution]

    @property
    def faults(self) -> list[Resolution]:
        return [r for r in self.values.values() if not r.ok]

    @property
    def key_types(self) -> dict[SchemaKey, tuple[bytes, str]]:
        """Descriptors and message type of each resolved key schema (for ``DecodeSpec``)."""
        return {
            k: (r.file_descriptor_set, r.message_type)
            for k, r in self.keys.items()
            if r.ok and r.file_descriptor_set is not None and r.message_type is not None
        }


def resolve_schema_key(resolver: SchemaResolver, key: SchemaKey) -> Resolution:
    """Resolve one schema key (by schema id or GUID, then its message indexes).

    Raises:
        RegistryUnavailable: the registry cannot be asked now (not the record's fault).
    """
    try:
        resolved, name = resolver.resolve_key(key)
    except RegistryUnavailable:
        raise
    except CodecError as exc:
        return Resolution(key, None, None, exc.code, exc.stage, str(exc))
    return Resolution(key, name, resolved.file_descriptor_set)


def resolve_schema_keys(
    resolver: SchemaResolver, keys: Iterable[SchemaKey]
) -> dict[SchemaKey, Resolution]:
    """Resolve every distinct key (in ``SchemaKey.sort_order``, so a batch always resolves
    in the same order)."""
    ordered = sorted(set(keys), key=SchemaKey.sort_order)
    return {k: resolve_schema_key(resolver, k) for k in ordered}
