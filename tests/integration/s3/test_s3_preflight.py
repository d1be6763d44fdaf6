"""Bad object-store settings fail before anything is written, with one line naming the
cause: refused credentials, a missing bucket, an unreachable endpoint."""

from __future__ import annotations

import pytest

from pipelines import bronze
from pipelines.settings import parse_config
from pipelines.settings.preflight import StoreError
from tests.support.stack import BOOTSTRAP, free_port

pytestmark = pytest.mark.integration


def config(path: str, s3: dict) -> object:
    return parse_config(
        {
            "lakehouse": {"path": path},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": ["s3it.none"]},
            "s3": s3,
        }
    )


def fails_with(spark, cfg) -> str:
    with pytest.raises(StoreError) as info:
        bronze.run(cfg, "available-now", spark=spark)
    line = str(info.value)
    assert "\n" not in line
    return line


def test_wrong_credentials_are_named_and_nothing_is_written(spark, s3_store, bucket):
    secret = "not-the-secret-" + s3_store.secret_access_key[:4]
    cfg = config(f"s3a://{bucket}/lh", s3_store.section(secret_access_key=secret))
    line = fails_with(spark, cfg)
    assert line.startswith("s3 credentials refused:") and bucket in line
    assert secret not in line and s3_store.access_key_id not in line
    assert s3_store.keys(bucket) == []


def test_a_missing_bucket_is_named(spark, s3_store):
    cfg = config("s3a://protolake-no-such-bucket/lh", s3_store.section())
    line = fails_with(spark, cfg)
    assert line.startswith("s3 bucket missing: 'protolake-no-such-bucket'")


def test_an_unreachable_endpoint_is_named_at_once(spark, s3_store):
    endpoint = f"http://127.0.0.1:{free_port()}"
    cfg = config("s3a://protolake-unreachable/lh", s3_store.section(endpoint=endpoint))
    assert fails_with(spark, cfg).startswith(f"s3 endpoint unreachable: {endpoint}")


def test_an_s3_scheme_lakehouse_is_served_by_s3a(spark, s3_store, bucket):
    # Hadoop has no file system of its own for s3://; the session is given S3A for it
    from pipelines.settings.clients import prepare_session

    cfg = config(f"s3://{bucket}/plain", s3_store.section())
    prepare_session(spark, cfg)  # checks the store through s3:// too
    path = f"s3://{bucket}/plain/t"
    spark.range(3).write.format("delta").save(path)
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 1, 2]
    assert any(k.startswith(f"{bucket}/plain/t/_delta_log/") for k in s3_store.keys(bucket))
    # the stack's SQL endpoint reads a table registered at s3:// too
    from tests.support.sql_endpoint import hive

    name = f"default.s3scheme_{bucket.replace('-', '_')}"
    with hive() as cur:
        cur.execute(f"CREATE TABLE {name} USING delta LOCATION '{path}'")
        try:
            cur.execute(f"SELECT count(*) FROM {name}")
            assert cur.fetchall() == [(3,)]
        finally:
            cur.execute(f"DROP TABLE {name}")
