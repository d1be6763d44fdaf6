"""Each streaming job serves its metrics on a port of its own (``pipelines.metrics``): the
deployment runs bronze and silver as two drivers on one worker with one configuration, and
the second could not listen on the first one's port."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from pipelines.metrics import MetricsPortError, serve_metrics
from pipelines.settings import parse_config
from tests.support.stack import free_port_pair


def _config(port: int) -> dict[str, object]:
    return {
        "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["t"]},
        "metrics": {"prometheus_port": port, "prometheus_address": "127.0.0.1"},
    }


def test_bronze_and_silver_drivers_each_serve_their_own_port() -> None:
    port = free_port_pair()
    serve = textwrap.dedent(
        f"""
        import sys, time
        from pipelines.metrics import serve_metrics
        from pipelines.settings import parse_config
        print(serve_metrics(parse_config({_config(port)!r}), sys.argv[1]), flush=True)
        time.sleep(60)
        """
    )
    drivers = [
        subprocess.Popen([sys.executable, "-c", serve, job], stdout=subprocess.PIPE, text=True)
        for job in ("bronze", "silver")
    ]
    try:
        served = [int(d.stdout.readline()) for d in drivers]  # type: ignore[union-attr]
        assert served == [port, port + 1]
        for p in served:
            text = urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10).read()
            assert b"protolake_batches_total" in text
    finally:
        for d in drivers:
            d.kill()
            d.wait()


def test_a_taken_port_is_an_error_naming_the_job_and_the_setting() -> None:
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        with pytest.raises(
            MetricsPortError, match=rf"silver's .*:{port + 1} .*prometheus_port \+ 1"
        ):
            serve_metrics(parse_config(_config(port)), "silver")
