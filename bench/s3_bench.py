"""Bronze and silver throughput with the lakehouse on the object store against local disk, one run.

    .venv/bin/python bench/s3_bench.py [--records 20000] [--repeat 2]

Needs the local stack with its S3 store (``infra/stack.sh up`` and ``infra/stack.sh up s3``;
the endpoint and credential come from ``run/s3.env``). It produces the demo stream (N records
over four topics, a few poison records) once, then runs bronze and then silver (available-now,
no quality rules) into a fresh lakehouse, alternately on local disk (a temporary folder) and
on ``s3a://protolake-demo/bench-<tag>-<i>`` (``PROTOLAKE_S3_BENCH_BUCKET``), ``--repeat``
times each, in one in-process ``local[2]`` session. Each stage's records/s is N over the
stage's wall time; the median of the runs counts, and the ratio object store / local disk is
printed. Every run's lakehouse is checked (bronze = silver + quarantine, N bronze rows).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")


def s3_environment() -> dict[str, str]:
    run = Path(os.environ.get("PROTOLAKE_RUN_DIR", ROOT / "run"))
    env_file = (run if run.is_absolute() else ROOT / run) / "s3.env"
    if not env_file.is_file():
        sys.exit(f"s3 bench: {env_file} missing: run `infra/stack.sh up s3` first")
    lines = env_file.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def make_config(lake: str, topics: list[str], env: dict[str, str]) -> Any:
    from pipelines.settings import parse_config

    raw: dict[str, Any] = {
        "lakehouse": {"path": lake},
        "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": topics},
        "registry": {"url": REGISTRY},
        "catalog": {
            "bronze_database": "",
            "silver_database": "",
            "quarantine_database": "",
            "quality_database": "",
        },
    }
    if lake.startswith("s3a://"):
        raw["s3"] = {
            "endpoint": env["AWS_ENDPOINT_URL"],
            "region": env["AWS_REGION"],
            "path_style_access": True,
            "access_key_id": env["AWS_ACCESS_KEY_ID"],
            "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        }
    return parse_config(raw)


def run_once(spark: Any, cfg: Any, records: int) -> dict[str, float]:
    from pipelines import bronze, silver
    from pipelines.quarantine import check_invariant

    t0 = time.monotonic()
    bronze.run(cfg, "available-now", spark=spark)
    t1 = time.monotonic()
    silver.run(cfg, "available-now", spark=spark)
    t2 = time.monotonic()
    report = check_invariant(spark, cfg.lakehouse_path)
    if not report.holds or report.bronze_records != records:
        raise SystemExit(f"s3 bench: {cfg.lakehouse_path} does not hold the stream: {report}")
    return {"bronze": records / (t1 - t0), "silver": records / (t2 - t1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    env = s3_environment()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pipelines.demo.produce import produce_demo_stream
    from pipelines.spark import build_session

    tag = uuid.uuid4().hex[:8]
    print(f"s3 bench: producing {args.records} demo records", flush=True)
    summary = produce_demo_stream(
        BOOTSTRAP, REGISTRY, topic_prefix=f"bench.s3.{tag}.", records=args.records, seed=3
    )
    spark = build_session("s3-bench")
    spark.sparkContext.setLogLevel("ERROR")
    bucket = os.environ.get("PROTOLAKE_S3_BENCH_BUCKET", "protolake-demo")
    runs: dict[str, list[dict[str, float]]] = {"local": [], "s3": []}
    with tempfile.TemporaryDirectory(prefix="s3-bench-") as tmp:
        for i in range(args.repeat):
            for where in ("local", "s3"):
                lake = f"{tmp}/lh-{i}" if where == "local" else f"s3a://{bucket}/bench-{tag}-{i}"
                result = run_once(spark, make_config(lake, summary.topics, env), args.records)
                runs[where].append(result)
                print(
                    f"  {where:5s} run {i}: bronze {result['bronze']:8.0f}/s  "
                    f"silver {result['silver']:8.0f}/s",
                    flush=True,
                )
    print(f"\ns3 bench results ({args.records} records, median of {args.repeat} runs)")
    for stage in ("bronze", "silver"):
        local = statistics.median(r[stage] for r in runs["local"])
        s3 = statistics.median(r[stage] for r in runs["s3"])
        print(
            f"  {stage:6s}  local disk {local:8.0f} records/s   object store {s3:8.0f} records/s"
            f"   ratio s3/local {s3 / local:.2f}"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
