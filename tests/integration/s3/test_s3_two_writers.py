"""Two writers appending to one Delta table on the object store from one driver, the way two
silver queries append quarantine rows: Delta's S3 log store serializes the commits of one
JVM, conflicting commits are retried, and every batch of each writer is in the table once."""

from __future__ import annotations

import threading
import time

import pytest

from lakehouse.delta import append_idempotent
from pipelines.settings import parse_config
from pipelines.settings.clients import prepare_session
from pipelines.settings.object_store import delta_storage_options
from tests.support.stack import BOOTSTRAP

pytestmark = pytest.mark.integration

BATCHES = 4
ROWS = 25


def _on_store(spark, s3_store, bucket):
    """The lakehouse config of ``bucket``, its [s3] settings given to the session."""
    cfg = parse_config(
        {
            "lakehouse": {"path": f"s3a://{bucket}/lh"},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": ["s3it.none"]},
            "s3": s3_store.section(),
        }
    )
    prepare_session(spark, cfg)
    return cfg


def test_two_writers_lose_no_commit(spark, s3_store, bucket):
    from deltalake import DeltaTable

    cfg = _on_store(spark, s3_store, bucket)
    path = f"s3a://{bucket}/lh/quarantine/records"
    errors: list[BaseException] = []

    def writer(app: str) -> None:
        try:
            for batch in range(BATCHES):
                rows = spark.range(ROWS).selectExpr(f"'{app}' AS app", f"{batch} AS batch", "id")
                append_idempotent(rows, path, app, batch)
                append_idempotent(rows, path, app, batch)  # a replayed batch: skipped
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(app,)) for app in ("query-a", "query-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    table = spark.read.format("delta").load(path)
    counts = {(r.app, r.batch): r["count"] for r in table.groupBy("app", "batch").count().collect()}
    assert counts == {(a, b): ROWS for a in ("query-a", "query-b") for b in range(BATCHES)}
    rs = DeltaTable(path, storage_options=delta_storage_options(cfg))
    versions = sorted(h["version"] for h in rs.history())
    assert versions == list(range(2 * BATCHES)), "one commit per batch, no gap, none twice"


def test_a_second_driver_is_refused_the_writer_lease(spark, s3_store, bucket):
    from lakehouse.checkpoints import read_text_lines, write_text
    from lakehouse.lease import WriterLeaseError, acquire_writer_lease

    _on_store(spark, s3_store, bucket)
    location = f"s3a://{bucket}/lh/_writers/silver"
    results: list[object] = []

    def take() -> None:
        try:
            results.append(acquire_writer_lease(spark, location))
        except WriterLeaseError as exc:
            results.append(exc)

    takers = [threading.Thread(target=take) for _ in range(2)]
    for t in takers:
        t.start()
    for t in takers:
        t.join(timeout=60)
    held = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, WriterLeaseError)]
    assert len(held) == 1 and len(refused) == 1, results  # the conditional put picks one
    assert "held by another driver" in str(refused[0]) and "\n" not in str(refused[0])
    held[0].release()
    assert read_text_lines(spark, location) is None
    # A lease whose owner died expires, and the next driver takes it over.
    write_text(spark, location, '{"owner": "gone:1:x", "expires": 0}')
    lease = acquire_writer_lease(spark, location)
    assert lease.owner in "".join(read_text_lines(spark, location) or [])
    lease.release()


def test_a_driver_whose_lease_was_taken_stops_writing(spark, s3_store, bucket):
    from lakehouse.checkpoints import read_text_lines, write_text
    from lakehouse.lease import WriterLeaseError, acquire_writer_lease

    _on_store(spark, s3_store, bucket)
    location = f"s3a://{bucket}/lh/_writers/bronze"
    lost: list[str] = []
    lease = acquire_writer_lease(spark, location, ttl=2.0, on_lost=lost.append)  # renews at 0.5 s
    foreign = '{"owner": "other:2:y", "expires": 9999999999}'
    write_text(spark, location, foreign)  # e.g. taken over while this driver was paused
    deadline = time.monotonic() + 30
    while not lost and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lost == [lease.loss()], "the renewal noticed the other driver, once"
    assert "no longer this driver's (holder: other:2:y)" in lost[0]
    with pytest.raises(WriterLeaseError, match=r"_writers/bronze: the writer lease is no longer"):
        lease.raise_if_lost()
    lease.release()
    assert read_text_lines(spark, location) == [foreign], "the other driver's lease stays"


def test_a_takeover_over_a_version_another_driver_replaced_is_refused_by_the_store(
    spark, s3_store, bucket
):
    # two drivers read one expired lease; the first takes it over; the second, however long it
    # stalled, puts over the version it read (If-Match on its etag), and the store refuses
    from lakehouse import lease as lease_module
    from lakehouse.checkpoints import read_text_lines, write_text
    from lakehouse.hadoop import hadoop_path

    _on_store(spark, s3_store, bucket)
    location = f"s3a://{bucket}/lh/_writers/takeover"
    write_text(spark, location, '{"owner": "gone:1:x", "expires": 0}')
    _, path, fs = hadoop_path(spark, location)
    expired, etag = lease_module._read_tagged(fs, path)
    assert expired == {"owner": "gone:1:x", "expires": 0} and etag
    first = lease_module.acquire_writer_lease(spark, location)
    try:
        late = '{"owner": "late:2:y", "expires": 9999999999}'
        assert not lease_module._replaced(fs, path, late, etag, "late:2:y")
        assert first.owner in "".join(read_text_lines(spark, location) or [])
        first.renew_once()  # its renewals put over its own version
        assert first.loss() is None
        assert first.owner in "".join(read_text_lines(spark, location) or [])
    finally:
        first.release()
    assert read_text_lines(spark, location) is None
