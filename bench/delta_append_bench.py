"""What the idempotency of a micro-batch's Delta append costs: ``append_idempotent`` against
a plain append of the same rows, one run, one Spark session.

    .venv/bin/python bench/delta_append_bench.py [--appends 12] [--rows 500]

Bronze (one append per topic table) and silver (one per message type, and the quarantine)
append every micro-batch with Delta's ``txnAppId``/``txnVersion`` (``lakehouse.delta``), so
that a batch replayed after a crash is skipped. Delta answers "has this table this app's
batch?" from the state of the table's snapshot (``Snapshot.transactions``), which it computes
by reading the log (checkpoint and commits) in a Spark job of its own, for each new
snapshot, so for every append. This bench appends ``--rows`` rows to two tables of the same
schema, alternating plain and idempotent appends, and prints the median seconds of each kind,
the Spark jobs each ran, and the ratio. The first append of each kind and the appends that
write a Delta checkpoint (every tenth commit) are left out: they measure something else.

The session is the jobs' own (``pipelines.spark.build_session``, ``local[2]`` with
``pipelines.spark.LOCAL_CONF``: Delta builds a snapshot's state in 2 partitions), the JVM's
defaults otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any


def timed_append(spark: Any, df: Any, path: str, batch_id: int | None) -> tuple[float, int]:
    """Seconds and Spark jobs of one append (idempotent when ``batch_id`` is given)."""
    from lakehouse.delta import append_idempotent

    group = f"append-{path}-{batch_id}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    if batch_id is None:
        df.write.format("delta").mode("append").save(path)
    else:
        append_idempotent(df, path, "bench-app", batch_id)
    seconds = time.perf_counter() - start
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    return seconds, jobs


def usual_jobs(appends: list[tuple[float, int]], kept: list[int]) -> int:
    """The number of Spark jobs most of the measured appends ran."""
    return statistics.mode(appends[i][1] for i in kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=12, help="appends of each kind")
    parser.add_argument("--rows", type=int, default=500, help="rows an append writes")
    args = parser.parse_args()
    if args.appends < 3:
        parser.error("--appends: at least 3 (the first of each kind is left out)")

    from pipelines.spark import build_session

    spark = build_session("delta-append-bench")
    root = tempfile.mkdtemp(prefix="delta-append-bench-")
    plain_path, idempotent_path = f"{root}/plain", f"{root}/idempotent"
    df = spark.range(args.rows).selectExpr("id", "cast(id as string) as value").persist()
    df.count()
    plain: list[tuple[float, int]] = []
    idempotent: list[tuple[float, int]] = []
    for i in range(args.appends):
        plain.append(timed_append(spark, df, plain_path, None))
        idempotent.append(timed_append(spark, df, idempotent_path, i))
    # commit i is version i; version 10, 20, ... writes a checkpoint
    kept = [i for i in range(1, args.appends) if i % 10 != 0]
    p = statistics.median(plain[i][0] for i in kept)
    q = statistics.median(idempotent[i][0] for i in kept)
    print(f"appends of {args.rows} rows, {len(kept)} of each kind measured (median)")
    print(f"  plain append:      {p:.3f} s, {usual_jobs(plain, kept)} Spark job(s)")
    print(f"  idempotent append: {q:.3f} s, {usual_jobs(idempotent, kept)} Spark job(s)")
    print(f"  idempotent / plain: {q / p:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
