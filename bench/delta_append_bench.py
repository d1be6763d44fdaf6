"""What the idempotency of a micro-batch's Delta append costs: ``append_idempotent`` against
a plain append of the same rows, one run, one Spark session.

    .venv/bin/python bench/delta_append_bench.py [--appends 12] [--rows 500]

Bronze (one append per topic table) and silver (one per message type, and the quarantine)
append every micro-batch with ``lakehouse.delta.append_idempotent``: the commit names the
stream and the batch (its ``userMetadata``), and only a batch that an earlier run may have
written (the first of a restarted query) is looked up first, in the table's recent history,
and written with Delta's ``txnAppId``/``txnVersion``. Delta answers those from the state of
the table's snapshot (``Snapshot.transactions``), which it computes by reading the log in a
Spark job of its own for each new snapshot. This bench appends ``--rows`` rows to three
tables of the same schema, in turn: a plain append, a fresh batch's append (what a running
stream pays per table and batch) and a checked one (what a replay pays, once per table and
restart). It prints the median seconds of each kind, the Spark jobs each ran, and the ratios
to the plain append. The first append of each kind and the appends that write a Delta
checkpoint (every ``lakehouse.delta.CHECKPOINT_INTERVAL`` commits, the interval of the tables
the jobs create) are left out: they measure something else
(``bench/checkpoint_interval_bench.py``).

The session is the jobs' own (``pipelines.spark.build_session``, ``local[2]`` with
``pipelines.spark.local_conf``: Delta builds a snapshot's state in 2 partitions, the JVM runs
its client compiler alone).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

KINDS = {
    "plain": "plain append",
    "fresh": "fresh batch (a running stream)",
    "checked": "checked batch (a replay)",
}


def timed_append(spark: Any, df: Any, path: str, batch_id: int, kind: str) -> tuple[float, int]:
    """Seconds and Spark jobs of one append of ``kind``: plain, fresh or checked."""
    from lakehouse.delta import ANY_BATCH_MAY_BE_REPLAYED, Replays, append_idempotent

    group = f"append-{path}-{batch_id}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    if kind == "plain":
        df.write.format("delta").mode("append").save(path)
    else:
        replays = Replays(fresh_from=0) if kind == "fresh" else ANY_BATCH_MAY_BE_REPLAYED
        append_idempotent(df, path, "bench-app", batch_id, replays=replays)
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

    from lakehouse.delta import CHECKPOINT_INTERVAL
    from pipelines.spark import build_session

    spark = build_session("delta-append-bench")
    root = tempfile.mkdtemp(prefix="delta-append-bench-")
    df = spark.range(args.rows).selectExpr("id", "cast(id as string) as value").persist()
    df.count()
    timings: dict[str, list[tuple[float, int]]] = {kind: [] for kind in KINDS}
    for i in range(args.appends):
        for kind in KINDS:
            timings[kind].append(timed_append(spark, df, f"{root}/{kind}", i, kind))
    # commit i is version i; every CHECKPOINT_INTERVAL-th writes a checkpoint
    kept = [i for i in range(1, args.appends) if i % CHECKPOINT_INTERVAL != 0]
    medians = {kind: statistics.median(timings[kind][i][0] for i in kept) for kind in KINDS}
    print(f"appends of {args.rows} rows, {len(kept)} of each kind measured (median)")
    for kind, label in KINDS.items():
        jobs = usual_jobs(timings[kind], kept)
        print(f"  {label + ':':<33} {medians[kind]:.3f} s, {jobs} Spark job(s)")
    for kind in ("fresh", "checked"):
        print(f"  {kind} / plain: {medians[kind] / medians['plain']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
