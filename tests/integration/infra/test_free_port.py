"""tests.support.stack.free_port: ports a test's servers can take, below the kernel's
ephemeral range, never twice in a process, never one that something holds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import stack

pytestmark = pytest.mark.integration


def ephemeral_range() -> range:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_ports_are_free_distinct_and_outside_the_ephemeral_range() -> None:
    ports = [stack.free_port() for _ in range(30)]
    assert len(set(ports)) == len(ports)
    assert all(p in stack.TEST_PORTS and p not in ephemeral_range() for p in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing holds it


def test_a_held_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    monkeypatch.setattr(stack, "TEST_PORTS", range(port, port + 1))
    monkeypatch.setattr(stack, "_handed_out", set())
    try:
        with pytest.raises(RuntimeError, match="no free port"):
            stack.free_port()
    finally:
        held.close()
    assert stack.free_port() == port  # released: now it is free
