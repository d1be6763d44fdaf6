"""Start the registry: in a daemon thread (`start_registry_server`) or as a process (`main`).

`start_registry_server` returns a `RegistryServerHandle`: the URL, ``stop()``, fault
injection (``fail_next``, ``delay_next``), direct registration and the request log. `main`
is the command line (``python -m infra.registry_server``, run by infra/stack.sh); it stops
cleanly (exit 0) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Iterable, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from .handler import Fault, RegistryRequestHandler, ServerState
from .store import SchemaStore

log = logging.getLogger("protolake.registry")


class RegistryServerHandle:
    """A running server: ``.url``, ``.stop()``, fault injection, direct registration."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread, state: ServerState):
        self._server = server
        self._thread = thread
        self.state = state
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)
        self.url = f"http://{self.host}:{self.port}"

    def __repr__(self) -> str:  # never the users' passwords
        return f"RegistryServerHandle(url={self.url!r})"

    def __enter__(self) -> RegistryServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def store(self) -> SchemaStore:
        return self.state.store

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request received so far, oldest first."""
        with self.state.lock:
            return list(self.state.requests)

    def clear_requests(self) -> None:
        with self.state.lock:
            self.state.requests.clear()

    def fail_next(self, n: int, status: int = 503) -> None:
        """Answer the next ``n`` requests with ``status`` (Confluent error body, code status*100+3)."""
        with self.state.lock:
            self.state.faults.append(Fault(remaining=n, status=status))

    def delay_next(self, n: int, seconds: float, status: int = 0) -> None:
        """Delay the next ``n`` responses by ``seconds`` (then answer normally, or ``status``)."""
        with self.state.lock:
            self.state.faults.append(Fault(remaining=n, status=status, delay=seconds))

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()

    def register(
        self,
        subject: str,
        schema_text: str,
        references: Iterable[Mapping[str, Any] | tuple[str, str, int]] = (),
        schema_type: str = "PROTOBUF",
    ) -> int:
        """Register directly (same validation as POST); return the schema id."""
        refs = [
            dict(r) if isinstance(r, Mapping) else {"name": r[0], "subject": r[1], "version": r[2]}
            for r in references
        ]
        body = {"schema": schema_text, "schemaType": schema_type, "references": refs}
        return self.state.store.register(subject, body).id

    def guid_of(self, schema_id: int) -> str:
        return self.state.store.get_schema(schema_id).guid

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def start_registry_server(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    users: Mapping[str, str] | Iterable[str] | None = None,
    data: str | None = None,
    ignore_format_serialized: bool = False,
    first_id: int = 1,
) -> RegistryServerHandle:
    """Start a server in a daemon thread and return its handle (``port=0``: a free port).

    Args:
        users: basic-auth users, ``{"user": "password"}`` or ``["user:password", ...]``;
            None means no authentication.
        data: JSON file to load from and persist to (None: memory only).
        ignore_format_serialized: answer ``.proto`` text even for ``?format=serialized``.
        first_id: the id the first schema gets (Confluent starts at 1).
    """
    state = ServerState(
        store=SchemaStore(data, first_id=first_id),
        users=_parse_users(users),
        ignore_format_serialized=ignore_format_serialized,
    )
    handler = type("BoundRegistryRequestHandler", (RegistryRequestHandler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, name=f"registry-{server.server_address[1]}", daemon=True
    )
    thread.start()
    return RegistryServerHandle(server, thread, state)


def _parse_users(users: Mapping[str, str] | Iterable[str] | None) -> dict[str, str] | None:
    if users is None:
        return None
    if isinstance(users, Mapping):
        return {str(k): str(v) for k, v in users.items()}
    parsed = {}
    for item in users:
        user, sep, password = item.partition(":")
        if not sep:
            raise ValueError("users must be 'user:password' strings")
        parsed[user] = password
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Confluent-compatible schema registry (local).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--data", default=None, help="JSON file to persist schemas to")
    parser.add_argument(
        "--users-env",
        default=None,
        help="name of an environment variable holding 'user:pass[,user:pass]' for basic auth",
    )
    parser.add_argument("--ignore-format-serialized", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    users = None
    if args.users_env:
        users = [u for u in os.environ.get(args.users_env, "").split(",") if u]
    handle = start_registry_server(
        args.port,
        host=args.host,
        users=users,
        data=args.data,
        ignore_format_serialized=args.ignore_format_serialized,
    )
    log.info("schema registry listening on %s (data %s)", handle.url, args.data or "memory")
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    handle.stop()
    log.info("schema registry stopped")
    return 0
