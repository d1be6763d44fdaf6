"""A local lakehouse has one driver by nature: its jobs take no writer lease (no Spark asked)."""

from __future__ import annotations

from pipelines.settings import parse_config
from pipelines.settings.clients import writer_lease


def test_a_local_lakehouse_takes_no_writer_lease(tmp_path):
    cfg = parse_config(
        {
            "lakehouse": {"path": str(tmp_path / "lake"), "writer_lease_seconds": 7},
            "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["t"]},
        }
    )
    assert writer_lease(None, cfg, "silver") is None  # type: ignore[arg-type]
