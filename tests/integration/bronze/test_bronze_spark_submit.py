"""The bronze job through spark-submit (pyspark's own, --master local[2]): the cluster path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lakehouse.layout import Layout
from pipelines import bronze
from pipelines.jobs import submit_command
from pipelines.settings import load_config
from tests.support.bronze_itkit import Kafka, read_bronze, unique_prefix, write_config

pytestmark = pytest.mark.integration


def test_bronze_through_spark_submit(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    prefix = unique_prefix("submit")
    topics = [f"{prefix}.orders", f"{prefix}.users"]
    kafka.create_topics(*topics)
    kafka.produce(topics[0], 30)
    kafka.produce(topics[1], 7)
    lake = tmp_path / "lake"
    cfg_file = write_config(tmp_path / "c.toml", lake, kafka.bootstrap, topics=topics)
    cmd = submit_command("bronze", cfg_file, "local[2]", args=["--json"])
    assert Path(cmd[0]).name == "spark-submit"

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_HOME", None)
    # Run from elsewhere: the job must not depend on the current directory.
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["records"] == 37
    assert summary["tables"] == Layout(load_config(cfg_file).lakehouse_path).bronze
    # the driver ran with what spark-submit shipped: the zip of the packages
    assert Path(cmd[cmd.index("--py-files") + 1]).name in out.stderr

    for topic in topics:
        table = lake / "bronze" / bronze.bronze_table_of_topic(topic)
        rows, count = read_bronze(spark, table)
        assert count == len(rows)
        assert rows == {k: v for k, v in kafka.expected.items() if k[0] == topic}
        # a job under spark-submit creates its tables with the lakehouse's checkpoint interval
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
        assert dict(detail["properties"])["delta.checkpointInterval"] == "100"
