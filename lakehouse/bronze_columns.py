"""The bronze table's columns, spelled once: what the bronze job writes and what the silver
job and ``protolake replay`` read of each record.

A bronze row is a Kafka record as Spark's Kafka source gives it (:data:`KAFKA_COLUMNS`), then
when bronze wrote it (:data:`INGESTED_AT`) and that instant's UTC date, the default partition
column (:data:`INGEST_DATE`). Silver carries :data:`RECORD_COLUMNS` of each record through
its framing and decoding (the Kafka columns less ``timestampType``, which silver keeps
nowhere).
"""

from __future__ import annotations

#: the Kafka source's columns, in the order bronze keeps them
KAFKA_COLUMNS: tuple[str, ...] = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)
#: when bronze wrote the row (absent from tables written before bronze kept it)
INGESTED_AT = "_ingested_at"
#: the UTC date of :data:`INGESTED_AT`, bronze's default partition column
INGEST_DATE = "_ingest_date"
#: every column of a bronze table, in order
BRONZE_TABLE_COLUMNS: tuple[str, ...] = (*KAFKA_COLUMNS, INGESTED_AT, INGEST_DATE)
#: the columns of a record that silver reads and carries (lineage, quarantine, decoding)
RECORD_COLUMNS: tuple[str, ...] = tuple(c for c in KAFKA_COLUMNS if c != "timestampType")
