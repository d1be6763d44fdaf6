"""The columns of a ``pyarrow.Table`` as Spark compares them, and which ones Arrow can answer for.

:class:`Columns` gives a batch's columns by name, each a :class:`Column` (its nulls, its values
as Spark compares them, a row's value as PySpark collects it) of a *kind*, known only when the
column's Arrow type is the one Spark's type maps to: ``string`` (UTF8_BINARY collation),
``int`` (integers of Spark's width), ``double``, ``float``, ``bool``, ``date`` (date32),
``decimal`` (decimal128 of the same precision and scale), ``timestamp`` (with a time zone, an
instant, for ``TimestampType``).

:class:`Unsupported` marks what Spark must answer; here: a column the batch or the schema
lacks, an unmodelled type, a kind the caller does not accept, nanoseconds Spark would
truncate, NaN or -0.0 among the compared values of a float column (:func:`odd_float`: Spark's
ordering and grouping normalise them). :mod:`quality.arrow_checks` raises it too for a rule or
argument it does not model, and then leaves the batch to Spark.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T  # noqa: N812

_HASHABLE = frozenset({"string", "int", "double", "float", "bool", "date", "timestamp", "decimal"})
_INTEGRAL = {
    T.ByteType: pa.int8(),
    T.ShortType: pa.int16(),
    T.IntegerType: pa.int32(),
    T.LongType: pa.int64(),
}
_SIMPLE = {
    T.DoubleType: (pa.float64(), "double"),
    T.FloatType: (pa.float32(), "float"),
    T.BooleanType: (pa.bool_(), "bool"),
    T.DateType: (pa.date32(), "date"),
}


class Unsupported(Exception):  # noqa: N818 - control flow: "Spark must answer"
    """A rule, column or value the Arrow evaluation cannot answer with certainty of Spark's answer."""


class Column:
    """One column: its values as Spark compares them, and as Spark's ``collect`` gives them."""

    def __init__(self, array: pa.ChunkedArray, kind: str | None) -> None:
        self.array = array
        self.kind = kind

    @cached_property
    def nulls(self) -> list[bool]:
        return self.array.is_null().to_pylist()

    @cached_property
    def values(self) -> list[Any]:
        """Python values: timestamps as epoch microseconds (Spark's instants)."""
        if self.kind is None:
            raise Unsupported
        if self.kind == "timestamp":
            try:
                micros = self.array.cast(pa.timestamp("us", tz=self.array.type.tz))
            except pa.ArrowInvalid as exc:  # nanoseconds Spark would truncate
                raise Unsupported from exc
            return micros.cast(pa.int64()).to_pylist()
        return self.array.to_pylist()

    def spark(self, i: int) -> Any:
        """Row ``i``'s value as PySpark collects it."""
        value = self.values[i]
        if self.kind == "timestamp" and value is not None:
            return T.TimestampType().fromInternal(value)
        return value

    def comparable(self) -> list[Any]:
        """The values, checked free of what Spark's ordering normalises (NaN, -0.0)."""
        if self.kind in ("double", "float") and any(odd_float(v) for v in self.values):
            raise Unsupported
        return self.values


class Columns:
    """A batch's columns by name (Arrow rows of a Spark schema), each read once."""

    def __init__(self, rows: pa.Table, schema: T.StructType) -> None:
        self._rows = rows
        self._types = {f.name: f.dataType for f in schema.fields}
        self._cache: dict[str, Column] = {}
        self.rows = rows.num_rows

    def get(self, name: str, kinds: frozenset[str] | None = _HASHABLE) -> Column:
        """The column, if its kind is one of ``kinds`` (None: any Arrow type)."""
        if name not in self._cache:
            if name not in self._rows.column_names or name not in self._types:
                raise Unsupported
            array = self._rows.column(name)
            self._cache[name] = Column(array, _kind(self._types[name], array.type))
        column = self._cache[name]
        if kinds is not None and column.kind not in kinds:
            raise Unsupported
        return column


def _kind(spark_type: T.DataType, arrow_type: pa.DataType) -> str | None:
    """How this module reads a column (None: not modelled): the Arrow type Spark's maps to."""
    cls = type(spark_type)
    if cls is T.StringType:
        binary = getattr(spark_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
        strings = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
        return "string" if binary and strings else None
    if cls in _INTEGRAL:
        return "int" if arrow_type == _INTEGRAL[cls] else None
    if cls in _SIMPLE:
        arrow, kind = _SIMPLE[cls]
        return kind if arrow_type == arrow else None
    if cls is T.TimestampType:
        instant = pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None
        return "timestamp" if instant else None
    if isinstance(spark_type, T.DecimalType):
        same = pa.types.is_decimal128(arrow_type) and (
            arrow_type.precision,
            arrow_type.scale,
        ) == (spark_type.precision, spark_type.scale)
        return "decimal" if same else None
    return None


def odd_float(value: Any) -> bool:
    """NaN or -0.0: values Spark's comparisons and grouping normalise."""
    if not isinstance(value, float):
        return False
    return math.isnan(value) or (value == 0.0 and math.copysign(1.0, value) < 0)
