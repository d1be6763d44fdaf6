"""lakehouse.sql_text against Spark's own parser: the SQL text of a type, a cast and a
literal gives what the PySpark Column of the same expression gives (types, nullability,
values), and a type the syntax cannot say exactly is refused rather than said wrong."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

from lakehouse import sql_text

NESTED = T.StructType(
    [
        T.StructField("a b", T.IntegerType(), False),
        T.StructField("x`y", T.ArrayType(T.StructType([T.StructField("k", T.StringType())]))),
        T.StructField("m", T.MapType(T.StringType(), T.DecimalType(12, 3))),
    ]
)
SAID = [
    T.LongType(),
    T.StringType(),
    T.BinaryType(),
    T.TimestampType(),
    T.ArrayType(T.IntegerType()),
    T.DecimalType(12, 3),
    NESTED,
]


@pytest.mark.parametrize("data_type", SAID, ids=lambda t: t.simpleString())
def test_a_cast_of_null_has_the_type_pysparks_cast_gives(spark: Any, data_type: T.DataType) -> None:
    text = sql_text.cast("NULL", data_type)
    assert text is not None
    ours = spark.range(1).select(sql_text.column(text, "c")).schema["c"]
    theirs = spark.range(1).select(F.lit(None).cast(data_type).alias("c")).schema["c"]
    assert ours == theirs
    assert ours.dataType == data_type


def test_timestamp_types_keep_their_kind_whatever_the_sessions_default(spark: Any) -> None:
    both = T.StructType(
        [T.StructField("ltz", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType())]
    )
    text = sql_text.cast("NULL", both)
    assert text is not None
    previous = spark.conf.get("spark.sql.timestampType")
    spark.conf.set("spark.sql.timestampType", "TIMESTAMP_NTZ")  # plain TIMESTAMP means NTZ
    try:
        assert spark.range(1).select(sql_text.column(text, "c")).schema["c"].dataType == both
    finally:
        spark.conf.set("spark.sql.timestampType", previous)


@pytest.mark.parametrize(
    "data_type",
    [
        T.ArrayType(T.IntegerType(), containsNull=False),
        T.MapType(T.StringType(), T.LongType(), valueContainsNull=False),
        T.StructType([T.StructField("a", T.LongType(), metadata={"comment": "c"})]),
        T.CalendarIntervalType(),
    ],
    ids=lambda t: t.simpleString(),
)
def test_a_type_the_syntax_cannot_say_exactly_is_refused(data_type: T.DataType) -> None:
    assert sql_text.sql_type(data_type) is None
    assert sql_text.cast("NULL", data_type) is None


def test_literals_give_the_values_and_types_of_pysparks(spark: Any) -> None:
    values = {
        "s": "it's a \\ 'quote' é \n",
        "b": b"\x00'\xff",
        "i": 42,
        "big": 2**40,
        "t": True,
        "l": [1, 2, 3],
        "n": None,
    }
    ours = spark.range(1).select(
        *[sql_text.column(sql_text.literal(v), name) for name, v in values.items()]
    )
    theirs = spark.range(1).select(
        *[
            (F.array(*[F.lit(i) for i in v]) if isinstance(v, list) else F.lit(v)).alias(name)
            for name, v in values.items()
        ]
    )
    assert ours.collect() == theirs.collect()
    assert ours.collect()[0].asDict() == values
    assert ours.schema == theirs.schema


def test_names_in_backticks_reach_the_column_of_that_name(spark: Any) -> None:
    df = spark.createDataFrame([(1, 2)], "`odd name` int, `tick``s` int")
    out = df.select(*sql_text.renamed([("odd name", "a"), ("tick`s", "b")]))
    assert out.collect()[0].asDict() == {"a": 1, "b": 2}
    assert df.where(sql_text.is_not_null("tick`s")).count() == 1


def test_a_literal_of_another_type_is_an_error() -> None:
    with pytest.raises(TypeError, match="no SQL literal for float"):
        sql_text.literal(1.5)
