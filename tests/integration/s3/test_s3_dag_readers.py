"""The DAGs' readers of the lakehouse (Delta versions and row counts, streaming checkpoints and
lags) on the stack's S3 store: a small lakehouse is written to a fresh bucket with delta-rs and
pyarrow (Delta tables, a non-table folder, checkpoint folders in Spark's format), then read
back through ``protolake_support`` with ``lakehouse.path = "s3a://bucket/lh"`` and ``[s3]``
keys from ``${env:...}``. Bad settings give one line naming the cause, with no secret in it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from protolake_support.environment import open_lakehouse
from protolake_support.progress import read_checkpoint, silver_lag
from protolake_support.tables import layout_counts

from lakehouse.layout import Layout
from lakehouse.row_counts import delta_row_count
from lakehouse.tables import silver_versions
from pipelines.quarantine_state import OUTCOME_COLUMN, REPLAYED
from pipelines.settings import parse_config
from pipelines.settings.object_store import delta_storage_options
from pipelines.settings.preflight import StoreError
from tests.support.airflow_kit import make_airflow
from tests.support.checkpoints import checkpoint_batch_files, delta_source_offset
from tests.support.s3 import S3_FROM_ENV, S3Store
from tests.support.stack import BOOTSTRAP, free_port

pytestmark = pytest.mark.integration

BRONZE = "s3it_dag_orders"  # bronze table, named after a topic Kafka does not have
TOPIC = "s3it-dag-readers-no-such-topic"


REFUSED_SNIPPET = """
import json
from protolake_support.environment import config_path
from protolake_support.progress import stream_parts
from protolake_support.tables import lakehouse_counts
c = config_path()
try:
    lakehouse_counts(c)
    summary = None
except Exception as exc:
    summary = f"{type(exc).__name__}: {exc}"
print(json.dumps([summary, stream_parts("silver", c)]))
"""


def config(root: str, env: dict[str, str], **s3: Any) -> Any:
    raw = {
        "lakehouse": {"path": root},
        "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": [TOPIC]},
        "s3": {**S3_FROM_ENV, **s3},
    }
    return parse_config(raw, env=env)


def rows(n: int, start: int = 0, **extra: list[Any]) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), **extra})


@pytest.fixture(scope="module")
def lake(s3_store: S3Store, bucket: str) -> dict[str, Any]:
    """The written lakehouse and what it holds."""
    root = f"s3a://{bucket}/lh"
    cfg = config(root, s3_store.environment)
    layout = Layout(root)
    options = delta_storage_options(cfg)

    def write(path: str, data: pa.Table) -> None:
        write_deltalake(path, data, mode="append", storage_options=options)

    write(layout.bronze_table(BRONZE), rows(3))  # version 0
    write(layout.bronze_table(BRONZE), rows(4, 3))  # version 1
    write(layout.silver_table("shop_order"), rows(5))  # version 0
    for i in range(3):  # versions 0..2
        write(layout.silver_table("shop_item"), rows(2, 10 * i))
    outcomes = [None, REPLAYED, None, "still_failing"]
    write(layout.quarantine, rows(4, **{OUTCOME_COLUMN: outcomes}))

    fs = s3_store.filesystem()
    key = root.removeprefix("s3a://")
    with fs.open_output_stream(f"{key}/silver/notes/readme.txt") as out:  # not a Delta table
        out.write(b"not a table")
    bronze_ck = layout.checkpoint("bronze", "per_topic").removeprefix("s3a://")
    silver_ck = layout.checkpoint("silver", BRONZE).removeprefix("s3a://")
    now_ms = int(time.time() * 1000)
    bronze_files = {
        "metadata": b'{"id":"b"}',
        **checkpoint_batch_files(0, {TOPIC: {"0": 5, "1": 2}}, timestamp_ms=now_ms),
        **checkpoint_batch_files(
            1, {TOPIC: {"0": 9, "1": 4}}, committed=False, timestamp_ms=now_ms
        ),
    }
    # silver planned bronze version 0 (index -1: version 0 is the next to read)
    silver_files = checkpoint_batch_files(
        0, delta_source_offset(0, starting=True), timestamp_ms=now_ms
    )
    for folder, files in ((bronze_ck, bronze_files), (silver_ck, silver_files)):
        for name, body in files.items():
            with fs.open_output_stream(f"{folder}/{name}") as out:
                out.write(body)
    return {"root": root, "cfg": cfg, "layout": layout, "written_at": time.time()}


def test_table_counts_and_versions_are_read_from_the_object_store(lake):
    layout, store = open_lakehouse(lake["cfg"])
    assert store.object_store and layout.root == lake["root"]
    assert layout_counts(layout, store) == {
        "bronze": {BRONZE: 7},
        "silver": {"shop_item": 6, "shop_order": 5},
        "quarantine": {"records": 3},  # the replayed row counts in silver only
    }
    assert silver_versions(layout, store=store) == {
        layout.silver_table("shop_item"): 2,
        layout.silver_table("shop_order"): 0,
    }
    assert delta_row_count(layout.silver_table("notes"), store) is None
    kept = delta_row_count(
        layout.bronze_table(BRONZE), store, where=("id", lambda v: v is not None and v >= 3)
    )
    assert kept == 4


def test_checkpoints_and_lags_are_read_from_the_object_store(lake):
    layout, store = open_lakehouse(lake["cfg"])
    bronze = read_checkpoint(layout.checkpoint("bronze", "per_topic"), store)
    assert (bronze.last_offsets_batch, bronze.last_commit_batch) == (1, 0)
    assert bronze.in_flight
    assert bronze.offsets == {"sources": [{TOPIC: {"0": 9, "1": 4}}]}
    age = bronze.last_commit_age_seconds
    assert age is not None and -60 < age < time.time() - lake["written_at"] + 60
    silver = read_checkpoint(layout.checkpoint("silver", BRONZE), store)
    assert (silver.last_offsets_batch, silver.last_commit_batch) == (0, 0)
    # bronze is at version 1; silver planned version 0 as the next to read: 2 versions unread
    assert silver_lag(silver, layout.bronze_table(BRONZE), store) == 2
    missing = read_checkpoint(layout.checkpoint("silver", "nothing_here"), store)
    assert (missing.last_offsets_batch, missing.last_commit_batch) == (None, None)


def test_the_dag_entry_points_read_the_configured_s3_lakehouse(
    lake, s3_store, registry_url, tmp_path: Path
):
    """What the DAG tasks call, from ``$PROTOLAKE_CONFIG`` with the keys in the worker's
    environment, in a worker-like process (Airflow imported, the registry connection set)."""
    toml = tmp_path / "protolake.toml"
    toml.write_text(
        f'[lakehouse]\npath = "{lake["root"]}"\n'
        f'[kafka]\nbootstrap_servers = "{BOOTSTRAP}"\ntopics = ["{TOPIC}"]\n'
        "[s3]\n"
        + "".join(
            f"{k} = {json.dumps(v) if isinstance(v, str) else str(v).lower()}\n"
            for k, v in S3_FROM_ENV.items()
        )
    )
    airflow = make_airflow(tmp_path / "airflow", toml, registry_url, tmp_path / "streams")
    airflow.env.update(s3_store.environment)
    out = airflow.python(
        "import json\n"
        "from protolake_support.environment import config_path\n"
        "from protolake_support.progress import stream_parts\n"
        "from protolake_support.tables import lakehouse_counts, silver_versions\n"
        "c = config_path()\n"
        "parts = {j: [[n, p and p.last_commit_batch, lag] for n, p, lag in stream_parts(j, c)]"
        " for j in ('bronze', 'silver')}\n"
        "print(json.dumps([lakehouse_counts(c), silver_versions(c), parts]))\n"
    )
    counts, versions, parts = out
    assert counts["silver"] == {"shop_item": 6, "shop_order": 5}
    assert counts["bronze"] == {BRONZE: 7} and counts["quarantine"] == {"records": 3}
    assert versions == {"shop_item": 2, "shop_order": 0}
    # the checkpoint's topic is not in Kafka: its lag is unknown (Spark's failOnDataLoss decides)
    assert parts == {"bronze": [["per_topic", 0, None]], "silver": [[BRONZE, 0, 2]]}

    # a refused secret: the summary fails in one line, the health probe logs it and goes on
    wrong = "wrong-" + s3_store.secret_access_key[::-1]
    airflow.env["AWS_SECRET_ACCESS_KEY"] = wrong
    (summary, probe), proc = airflow.python_run(REFUSED_SNIPPET)
    assert summary.startswith("StoreError: s3 credentials refused:") and "\n" not in summary
    assert probe == []
    assert "checkpoints not readable: s3 credentials refused" in proc.stdout + proc.stderr
    for secret in (wrong, s3_store.secret_access_key, s3_store.access_key_id):
        assert secret not in summary + proc.stdout + proc.stderr


def test_refused_credentials_are_named_without_the_secret(lake, s3_store):
    secret = "not-the-secret-" + s3_store.secret_access_key[:4]
    cfg = config(lake["root"], {**s3_store.environment, "AWS_SECRET_ACCESS_KEY": secret})
    with pytest.raises(StoreError) as info:
        open_lakehouse(cfg)
    line = str(info.value)
    assert line.startswith("s3 credentials refused:") and lake["layout"].root.split("/")[2] in line
    assert "\n" not in line
    assert secret not in line and s3_store.access_key_id not in line


def test_a_missing_bucket_and_an_unreachable_endpoint_are_named(s3_store):
    cfg = config("s3a://protolake-no-such-bucket/lh", s3_store.environment)
    with pytest.raises(StoreError, match=r"^s3 bucket missing: 'protolake-no-such-bucket'"):
        open_lakehouse(cfg)
    endpoint = f"http://127.0.0.1:{free_port()}"
    cfg = config("s3a://protolake-x/lh", {**s3_store.environment, "AWS_ENDPOINT_URL": endpoint})
    with pytest.raises(StoreError, match=rf"^s3 endpoint unreachable: {endpoint}"):
        open_lakehouse(cfg)
