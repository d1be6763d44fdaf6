"""Timestamp and Duration columns (``pipelines.proto_types``' mapping of the two
well-known types): a Timestamp as microseconds since the epoch (UTC), a Duration as seconds
(a double). A value outside the type's range, as protobuf's JSON mapping checks it, makes no
row: the converter raises, and the record goes to quarantine (``BAD_PAYLOAD``). (Inside a
message kept as JSON text, ``_json`` writes its fallback text instead.)"""

from __future__ import annotations

import operator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z
TIMESTAMP_SECONDS = (-62_135_596_800, 253_402_300_799)
#: google.protobuf.Duration's range: about +-10,000 years
DURATION_SECONDS = 315_576_000_000
NANOS = 999_999_999


def null_mask(present: list[bool] | None) -> pa.BooleanArray | None:
    """Arrow's null mask of the values not ``present`` (None: all present)."""
    return None if present is None else pc.invert(pa.array(present, pa.bool_()))


_SECONDS = operator.attrgetter("seconds")
_NANOS = operator.attrgetter("nanos")


def _within(array: pa.Array, low: int, high: int) -> bool:
    bounds = pc.min_max(array)
    return len(array) == 0 or (low <= bounds["min"].as_py() and bounds["max"].as_py() <= high)


def build_timestamp(values: list[Any], present: list[bool] | None) -> pa.Array:
    """Timestamps as microseconds since the epoch, UTC (nanos truncated to whole
    microseconds, Spark's precision).

    Raises:
        ValueError: one is out of range (seconds or nanos).
    """
    seconds = pa.array(list(map(_SECONDS, values)), pa.int64())
    nanos = pa.array(list(map(_NANOS, values)), pa.int64())
    if not (_within(seconds, *TIMESTAMP_SECONDS) and _within(nanos, 0, NANOS)):
        raise ValueError("a Timestamp out of range (years 1 to 9999, nanos 0 to 999,999,999)")
    micros = pc.divide(nanos, 1000)
    total = pc.add_checked(pc.multiply_checked(seconds, 1_000_000), micros)
    if present is not None:
        total = pc.if_else(pa.array(present, pa.bool_()), total, None)
    return total.cast(ARROW_TIMESTAMP)


def build_duration(values: list[Any], present: list[bool] | None) -> pa.Array:
    """Durations as seconds, ``(seconds * 10^9 + nanos) / 10^9`` correctly rounded.

    Raises:
        ValueError: one is out of range, or its seconds and nanos differ in sign.
    """
    seconds = list(map(_SECONDS, values))
    nanos = list(map(_NANOS, values))
    if not _valid_durations(pa.array(seconds, pa.int64()), pa.array(nanos, pa.int64())):
        raise ValueError(
            "a Duration out of range (+-315,576,000,000 s, nanos within +-999,999,999 and of "
            "the seconds' sign)"
        )
    floats = [(s * 1_000_000_000 + n) / 1_000_000_000 for s, n in zip(seconds, nanos, strict=True)]
    return pa.array(floats, type=pa.float64(), mask=null_mask(present))


def _valid_durations(seconds: pa.Array, nanos: pa.Array) -> bool:
    in_range = _within(seconds, -DURATION_SECONDS, DURATION_SECONDS) and _within(
        nanos, -NANOS, NANOS
    )
    opposite = pc.less(pc.multiply(pc.sign(seconds), pc.sign(nanos)), 0)
    return in_range and not pc.any(opposite).as_py()
