"""Where silver's decode time goes (``bench/silver_bench.py``): the parts of the two passes
timed one by one on the same input, each ending in Spark's ``noop`` sink.

- input only: producing the input rows' bronze columns (every Spark part below includes it);
- frame heads: the head pass (``frame_heads.head_counts``, JVM only);
- framed records: the records of the schema key, framed by JVM expressions (JVM only);
- Arrow round trip: the decode pass's input to the Python workers and an all-null batch of
  the decoded schema back (validity buffers only: no values, not even the lineage's): the
  JVM's rows to Arrow, the transfer out, and the Python side's reading; no decoding;
- decode pass: the same with the real decoder (``decode.decode_version``);
- the decoder alone: ``decode.decode_batches`` on one core in this process, over Arrow
  batches collected beforehand (no JVM, no transfer).

The decode pass minus the round trip is the decoder's work plus what the all-null batch does
not pay: the transfer of the real result (the decoded, nested columns and the lineage) back to
the JVM and its conversion into rows, sharing the two cores with the decoder.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from lakehouse.bronze_columns import RECORD_COLUMNS
from pipelines.silver.decode import (
    DecodeSpec,
    decode_batches,
    decode_input,
    decode_version,
    decoded_schema,
    message_spark_schema,
)

LOCAL_RECORDS = 200_000


def _noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    """The shortest of ``repeat`` runs of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _round_trip(records: DataFrame, spec: DecodeSpec) -> DataFrame:
    """The decode pass's transfer alone: its input columns out, all-null decoded rows back."""
    schema = decoded_schema(
        message_spark_schema(spec.file_descriptor_set, spec.message_type, spec.max_depth)
    )
    arrow = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)

    def nulls(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = [pa.nulls(batch.num_rows, f.type) for f in arrow]
            yield pa.RecordBatch.from_arrays(columns, schema=arrow)

    return records.select(*decode_input(spec)).mapInArrow(nulls, schema)


def print_breakdown(
    input_rows: Callable[[], DataFrame],
    head_pass: Callable[[], Any],
    records: Callable[[], DataFrame],
    spec: DecodeSpec,
    n: int,
    repeat: int,
) -> None:
    """Print each part's seconds for ``n`` records (best of ``repeat``) and the decoder's
    microseconds per record on one core."""
    parts = {
        "input only": lambda: _noop(input_rows().select(*RECORD_COLUMNS)),
        "frame heads (JVM)": head_pass,
        "framed records (JVM)": lambda: _noop(records()),
        "Arrow round trip, no decoding": lambda: _noop(_round_trip(records(), spec)),
        "decode pass": lambda: _noop(decode_version(records(), spec)),
    }
    print(f"\nwhere the decode time goes, {n:,} records (seconds, best of {repeat}):")
    seconds = {name: best_of(fn, repeat) for name, fn in parts.items()}
    for name, s in seconds.items():
        print(f"  {name:34s} {s:7.2f} s")
    local = min(n, LOCAL_RECORDS)
    batches = records().select(*decode_input(spec)).limit(local).toArrow().to_batches(10_000)

    def decode_locally() -> None:
        for _ in decode_batches(spec, batches):
            pass

    decode_locally()  # builds the converter and the compiled decoder once, untimed
    per_record = best_of(decode_locally, repeat) / local
    decoding = seconds["decode pass"] - seconds["Arrow round trip, no decoding"]
    print(
        f"  the decoder alone, one core        {per_record * 1e6:7.2f} us/record "
        f"({per_record * n / 2:.2f} s for {n:,} on two cores)\n"
        f"  decode pass - round trip           {decoding:7.2f} s: the decoder, and its "
        "result back to the JVM, in rows"
    )
