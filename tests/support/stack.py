"""Addresses of the local stack (``infra/stack.sh``) and a free port for servers a test starts.

Kafka is ``PROTOLAKE_KAFKA_BOOTSTRAP`` (default 127.0.0.1:9092), the schema registry
``PROTOLAKE_REGISTRY_URL`` (default http://127.0.0.1:8081). A stack that does not answer fails
the tests that need it (CI starts it; run ``infra/stack.sh up``): they never skip. The
metastore and the SQL endpoint are ``PROTOLAKE_METASTORE_PORT`` (9083) and
``PROTOLAKE_SQL_HOST``/``PROTOLAKE_SQL_PORT`` (127.0.0.1:10000). The stack's run folder (its
logs, pids, credentials) is ``PROTOLAKE_RUN_DIR`` (default ``run`` in the repository).
"""

from __future__ import annotations

import json
import os
import random
import socket
import urllib.request
from pathlib import Path

import pytest

BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")
# The analysts' services (infra/catalog.sh): the metastore and the SQL endpoint.
METASTORE_URI = f"thrift://127.0.0.1:{os.environ.get('PROTOLAKE_METASTORE_PORT', '9083')}"
SQL_HOST = os.environ.get("PROTOLAKE_SQL_HOST", "127.0.0.1")
SQL_PORT = int(os.environ.get("PROTOLAKE_SQL_PORT", "10000"))
ROOT = Path(__file__).resolve().parents[2]


def run_dir() -> Path:
    """The stack's run folder: ``$PROTOLAKE_RUN_DIR`` (relative to the repository), else run/."""
    run = Path(os.environ.get("PROTOLAKE_RUN_DIR", "run"))
    return run if run.is_absolute() else ROOT / run


# Ports for servers a test starts: below the kernel's ephemeral range (32768-60999 here), so a
# client connection's local end never takes one between a test's choice and its server's
# start (or a restart on the same port). Between the stack's (up to 10000, and SeaweedFS's
# gRPC ports 18333-18336) and the store-outage test's private ones (20000 and up).
TEST_PORTS = range(11000, 18000)
_handed_out: set[int] = set()  # never the same port twice in a process (several picked at once)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing holds right now, outside the ephemeral range."""
    tries = min(200, len(TEST_PORTS))
    for port in random.sample(TEST_PORTS, tries):
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {TEST_PORTS} after {tries} tries")


def free_port_pair() -> int:
    """A port of :func:`free_port` whose next one is free too (the streaming jobs' metrics
    endpoints: bronze's port and silver's, the next)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        _handed_out.add(port + 1)
        return port
    raise RuntimeError("no two free ports in a row")


def check_kafka(bootstrap: str = BOOTSTRAP) -> str:
    """``bootstrap`` when the broker answers; fails the test otherwise."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {bootstrap} does not answer ({exc}); run `infra/stack.sh up`")
    return bootstrap


def check_registry(url: str = REGISTRY) -> str:
    """``url`` when the stack's schema registry answers; fails the test otherwise."""
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=10) as response:
            response.read()
    except OSError as exc:
        pytest.fail(f"schema registry at {url} does not answer ({exc}); run `infra/stack.sh up`")
    return url


def check_port(host: str, port: int, what: str) -> None:
    """Fail the test when nothing accepts a connection on ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        pytest.fail(f"{what} at {host}:{port} does not answer ({exc}); run `infra/stack.sh up`")


def register_proto_schema(url: str, subject: str, text: str) -> int:
    """Register ``.proto`` text under ``subject`` at the registry ``url`` (its comments kept,
    as a producer's serializer registers them); return the schema id."""
    req = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schemaType": "PROTOBUF", "schema": text}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(json.loads(resp.read())["id"])
