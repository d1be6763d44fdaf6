"""Time-bounded readiness probes for the local stack, used by infra/stack.sh.

    python infra/healthcheck.py kafka 127.0.0.1:9092 [--timeout 60]
    python infra/healthcheck.py registry http://127.0.0.1:8081 [--timeout 30]
    python infra/healthcheck.py tcp 127.0.0.1:9083 [--timeout 60]
    python infra/healthcheck.py s3 http://127.0.0.1:8333 [--timeout 60]

Exit 0 as soon as the service answers a real request (Kafka: a metadata request through
confluent-kafka's AdminClient that names at least one broker; registry: ``GET /subjects``
answering a JSON list; tcp: the port accepts a connection, for servers that open their port
only once ready, as the metastore and the Spark Thrift Server do; s3: ``GET /`` answered by
an S3 API, an XML bucket list or an S3 error such as AccessDenied for this anonymous
request), exit 1 with a one-line reason on stderr when the deadline passes.
``--pid N`` makes the probe give up early when that process dies (no point waiting 60 s for
a broker that crashed on start).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def probe_kafka(bootstrap: str) -> str | None:
    """Return None when the broker answers metadata, else the reason it did not."""
    from confluent_kafka.admin import AdminClient

    # A bounded client: no retries beyond the deadline, quiet logs (we report ourselves).
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 3000})
    try:
        md = admin.list_topics(timeout=3)
    except Exception as exc:  # KafkaException: transport errors while the broker starts
        return f"metadata request failed: {exc}"
    if not md.brokers:
        return "metadata names no broker yet"
    return None


def probe_registry(url: str) -> str | None:
    """Return None when the registry answers ``GET /subjects`` with a JSON list."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/subjects", timeout=3) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 401:  # auth-protected registry: it is up, and that is all we ask
            return None
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return str(exc)
    if not isinstance(body, list):
        return f"unexpected body {body!r:.80}"
    return None


def probe_tcp(address: str) -> str | None:
    """Return None when ``host:port`` accepts a TCP connection."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return None
    except OSError as exc:
        return str(exc)


def probe_s3(url: str) -> str | None:
    """Return None when an S3 API answers ``GET /`` (an anonymous request: an S3 error counts)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/", timeout=3) as resp:
            body = resp.read(4096)
    except urllib.error.HTTPError as exc:
        body = exc.read(4096)
    except OSError as exc:
        return str(exc)
    if b"<Error>" in body or b"ListAllMyBucketsResult" in body:
        return None
    return f"no S3 answer yet ({body[:80]!r})"


PROBES = {
    "kafka": probe_kafka,
    "registry": probe_registry,
    "tcp": probe_tcp,
    "s3": probe_s3,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("service", choices=sorted(PROBES))
    parser.add_argument("address")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--pid", type=int, default=None, help="give up when this process dies")
    args = parser.parse_args(argv)
    probe = PROBES[args.service]
    deadline = time.monotonic() + args.timeout
    reason = "not probed"
    while time.monotonic() < deadline:
        if not _alive(args.pid):
            print(f"{args.service}: process {args.pid} exited during start", file=sys.stderr)
            return 1
        reason = probe(args.address)
        if reason is None:
            return 0
        time.sleep(0.5)
    print(
        f"{args.service} at {args.address} not ready after {args.timeout:.0f} s: {reason}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
