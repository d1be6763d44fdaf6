"""Column expressions as Spark SQL text: one parse in the JVM instead of a call per node.

PySpark builds a ``Column`` through the JVM: every function, literal, cast and alias is a
Py4J round trip (``F.col("a") == F.lit(1)`` is about thirty, and each Java object the Python
side lets go of is one more, from Py4J's collector thread). A silver micro-batch builds
thousands of them (its quarantine projections, frame lookups, table alignments, quality
aggregates), so on a busy driver the batch waits seconds for them whatever its size.
``F.expr`` of the same expression written as text costs three round trips, whatever its size.

These helpers write that text exactly: names in backticks, strings and bytes as hexadecimal
literals (no escaping rules to get wrong), and a type only when Spark's SQL type syntax can
say it exactly (:func:`sql_type` is None otherwise: the caller builds the Column instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

_ATOMIC = (
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.DecimalType,
    T.BinaryType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
)


class SqlText(str):
    """SQL text of an expression, where a plain ``str`` is a column name."""


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: in backticks, a backtick in it doubled."""
    return "`" + name.replace("`", "``") + "`"


def sql_type(data_type: T.DataType) -> str | None:
    """``data_type`` in Spark's SQL type syntax, or None when that syntax cannot say it
    exactly (an array of non-null elements, a map of non-null values, a field with metadata,
    a collated string, a type not listed here)."""
    if isinstance(data_type, T.StringType):
        return "STRING" if data_type == T.StringType() else None
    if isinstance(data_type, T.TimestampType):  # plain TIMESTAMP follows spark.sql.timestampType
        return "TIMESTAMP_LTZ"
    if isinstance(data_type, _ATOMIC):
        return data_type.simpleString().upper()
    if isinstance(data_type, T.ArrayType):
        element = sql_type(data_type.elementType)
        return f"ARRAY<{element}>" if element and data_type.containsNull else None
    if isinstance(data_type, T.MapType):
        key, value = sql_type(data_type.keyType), sql_type(data_type.valueType)
        ok = key and value and data_type.valueContainsNull
        return f"MAP<{key}, {value}>" if ok else None
    if isinstance(data_type, T.StructType):
        fields = []
        for f in data_type.fields:
            field_type = sql_type(f.dataType)
            if field_type is None or f.metadata:
                return None
            fields.append(f"{quoted(f.name)}: {field_type}{'' if f.nullable else ' NOT NULL'}")
        return f"STRUCT<{', '.join(fields)}>"
    return None


def literal(value: Any) -> str:
    """``value`` (None, bool, int, str, bytes, or a list of these) as a SQL literal: a string
    is its UTF-8 bytes cast to a string, so no character needs escaping."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return f"CAST(X'{value.encode().hex()}' AS STRING)"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, list | tuple):
        return "ARRAY(" + ", ".join(literal(v) for v in value) + ")"
    raise TypeError(f"no SQL literal for {type(value).__name__}: {value!r}")


def cast(sql: str, data_type: T.DataType) -> str | None:
    """``CAST(sql AS type)``, or None when :func:`sql_type` cannot say the type."""
    type_text = sql_type(data_type)
    return None if type_text is None else f"CAST({sql} AS {type_text})"


def column(sql: str, alias: str | None = None) -> Column:
    """The Column of the SQL text ``sql`` (one parse), named ``alias`` if given."""
    return F.expr(sql if alias is None else f"{sql} AS {quoted(alias)}")


def renamed(names: Sequence[tuple[str, str]]) -> list[Column]:
    """The columns ``(name, alias)`` named ``alias``: one parse each."""
    return [column(quoted(name), alias) for name, alias in names]


def is_not_null(name: str) -> str:
    """SQL text: the column ``name`` is not null (for ``DataFrame.where``)."""
    return f"{quoted(name)} IS NOT NULL"
