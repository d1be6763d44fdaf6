"""How Spark cuts the bronze records a silver batch ships to the Python workers into Arrow
batches: by their number alone where that already keeps a batch under the byte limit.

Spark ends an Arrow batch at ``spark.sql.execution.arrow.maxRecordsPerBatch`` records or
``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (Spark 4.2's default: 64 MB), whichever
comes first. To know the bytes it measures the batch being written after every record, and
that measure walks each nested column (a record's ``headers``, a list of structs) again each
time. Measured with the optimising JIT compiler on 2 cores (``bench/silver_bench.py``, 1M
records, JFR): a fifth of the executor threads' CPU samples of the decode pass were in that
measure; the pass took 1.94-2.16 s with it off against 2.39-2.45 s on (the Arrow round trip
without decoding: 1.04-1.34 s against 1.40-1.57 s).

Spark skips the measure when the byte limit is ``Int.MaxValue``. So each batch sets, on its
query's own session, the byte limit off when its largest record (:func:`record_bytes`, an
upper bound read with the frame heads) times the record limit stays under the launch's byte
limit: the records' number then ends every Arrow batch first, as it would with the limit on.
A batch with a larger record, or with no record limit, gets the launch's limit back. The
choice is made once the frame heads are read, before any pass of the batch ships records to
the Python workers (the Python framing, the decode passes); a batch of the driver path ships
none and gets the launch's limit back, so that no batch runs with what the one before it chose.
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias

from pipelines.spark import set_for_query

MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
#: Spark's value for no byte limit: it then measures nothing
UNBOUNDED = 2**31 - 1
#: bytes an Arrow batch gives a record besides its binary and string data (offsets, validity,
#: the fixed-width lineage and frame columns, a key's GUID), more than they take
RECORD_OVERHEAD = 192
#: the same for each Kafka header (offsets and validity of the list, struct, key and value;
#: 8-byte offsets with ``spark.sql.execution.arrow.useLargeVarTypes``)
HEADER_OVERHEAD = 24
#: a key's frame columns, when shipped, take at most this many times its length (one 4-byte
#: message index per byte of the key), besides its bytes and :data:`RECORD_OVERHEAD`
KEY_FRAME_FACTOR = 4


def _length(column: str) -> str:
    return f"coalesce(CAST(octet_length({column}) AS BIGINT), 0L)"


def record_bytes() -> Column:
    """An upper bound of the bytes a bronze record takes in an Arrow batch shipped to the
    Python workers (its value, key, topic and headers, and what each pass adds to them).

    One SQL expression: parsed in one call into the JVM, where the same expression built of
    Column functions takes about a hundred (its lambda most of them)."""
    each_header = (
        f"aggregate(headers, 0L, (total, h) -> "
        f"total + {_length('h.key')} + {_length('h.value')} + {HEADER_OVERHEAD})"
    )
    # a record without headers (empty, or null: size -1, or null with ANSI mode) skips the lambda
    headers = f"CASE WHEN size(headers) > 0 THEN {each_header} ELSE 0L END"
    key = f"{_length('key')} * {1 + KEY_FRAME_FACTOR}"
    return F.expr(
        f"{RECORD_OVERHEAD} + {_length('value')} + {key} + {_length('topic')} + {headers}"
    )


class ArrowBatches:
    """Chooses, batch by batch, the Arrow byte limit of one silver query (module docstring).

    Args:
        main: the job's session, never changed.
        max_records: its ``spark.sql.execution.arrow.maxRecordsPerBatch`` (0 or less: none).
        max_bytes: its ``spark.sql.execution.arrow.maxBytesPerBatch``, in bytes.
    """

    def __init__(self, main: SparkSession, max_records: int, max_bytes: int) -> None:
        self.main = main
        self.max_records = max_records
        self.max_bytes = max_bytes

    @classmethod
    def for_session(cls, spark: SparkSession) -> ArrowBatches:
        """The limits ``spark`` runs with, as Spark reads them (sizes such as ``64m`` in
        bytes)."""
        conf = spark._jsparkSession.sessionState().conf()
        return cls(spark, int(conf.arrowMaxRecordsPerBatch()), int(conf.arrowMaxBytesPerBatch()))

    def settings_for(self, largest_record: int | None) -> dict[str, str]:
        """The byte limit for a batch whose largest record takes ``largest_record`` bytes
        (:func:`record_bytes`; None: not known)."""
        bounded = (
            largest_record is not None
            and self.max_records > 0
            and largest_record * self.max_records <= self.max_bytes
        )
        return {MAX_BYTES: str(UNBOUNDED if bounded else self.max_bytes)}

    def choose(self, session: SparkSession, largest_record: int | None) -> None:
        """Set the byte limit for a batch on ``session``, the query's own (the micro-batch
        DataFrame's ``sparkSession``); the job's session is left alone."""
        set_for_query(self.main, session, self.settings_for(largest_record))
