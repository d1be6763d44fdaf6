"""Step 2 of a silver micro-batch: resolve each distinct schema once, on the driver.

Only the distinct ``_schema_key`` values of a batch come to the driver (a handful of strings,
whatever the number of records). Each is resolved with ``codec.SchemaResolver``, which caches
by schema id/GUID across batches, so the registry is asked once per schema for the life of
the job.

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
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Row

from codec import CodecError, Frame, RegistryUnavailable, SchemaResolver

from .framing import parse_schema_key


@dataclass(frozen=True)
class Resolution:
    """What one schema key resolved to: a message type and its descriptors, or a fault."""

    schema_key: str
    schema_id: int | None
    schema_guid: str | None
    message_indexes: tuple[int, ...]
    message_type: str | None = None
    file_descriptor_set: bytes | None = None
    code: str | None = None
    stage: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is None

    @property
    def version(self) -> str:
        """The writer schema, ``id:<n>`` or ``guid:<g>``: one schema version of the type."""
        return self.schema_key.partition("|")[0]


@dataclass(frozen=True)
class KeyCounts:
    """Step 1's result: records per (value schema key, key schema key, Kafka topic); null
    value schema key: bad frame."""

    rows: list[Row]

    @property
    def records(self) -> int:
        return sum(int(r["count"]) for r in self.rows)

    @property
    def value_keys(self) -> list[str]:
        return sorted({r["_schema_key"] for r in self.rows if r["_schema_key"]})

    @property
    def key_keys(self) -> list[str]:
        return sorted({r["_key_schema_key"] for r in self.rows if r["_key_schema_key"]})

    @property
    def bad_frames(self) -> bool:
        return any(r["_schema_key"] is None for r in self.rows)

    def topics_of(self, value_keys: Iterable[str]) -> list[str]:
        """The Kafka topics records of ``value_keys`` came from, sorted."""
        wanted = set(value_keys)
        return sorted({r["topic"] for r in self.rows if r["_schema_key"] in wanted and r["topic"]})

    def per_value_key(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.rows:
            if r["_schema_key"]:
                out[r["_schema_key"]] += int(r["count"])
        return out


@dataclass(frozen=True)
class Resolved:
    """Step 2's result: what each value schema key and each key schema key resolved to."""

    values: dict[str, Resolution]
    keys: dict[str, Resolution]

    @property
    def faults(self) -> list[Resolution]:
        return [r for r in self.values.values() if not r.ok]

    @property
    def key_types(self) -> dict[str, tuple[bytes, str]]:
        """Descriptors and message type of each resolved key schema (for ``DecodeSpec``)."""
        return {
            k: (r.file_descriptor_set, r.message_type)
            for k, r in self.keys.items()
            if r.ok and r.file_descriptor_set is not None and r.message_type is not None
        }


def resolve_schema_key(resolver: SchemaResolver, key: str) -> Resolution:
    """Resolve one schema key.

    Raises:
        RegistryUnavailable: the registry cannot be asked now (not the record's fault).
    """
    schema_id, schema_guid, indexes = parse_schema_key(key)
    frame = Frame(
        magic=0 if schema_id is not None else 1,
        schema_id=schema_id,
        schema_guid=schema_guid,
        message_indexes=indexes,
        payload_offset=0,
        source="prefix",
    )
    try:
        resolved = resolver.resolve(frame)
        name = resolved.message_type_for(indexes)
    except RegistryUnavailable:
        raise
    except CodecError as exc:
        return Resolution(
            key, schema_id, schema_guid, indexes, None, None, exc.code, exc.stage, str(exc)
        )
    return Resolution(key, schema_id, schema_guid, indexes, name, resolved.file_descriptor_set)


def resolve_schema_keys(resolver: SchemaResolver, keys: Iterable[str]) -> dict[str, Resolution]:
    """Resolve every distinct key (sorted, so a batch always resolves in the same order)."""
    return {k: resolve_schema_key(resolver, k) for k in sorted(set(keys))}
