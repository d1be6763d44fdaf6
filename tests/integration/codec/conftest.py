"""Fixtures for the codec's registry tests: the project's registry test server with basic auth
or answering text only (the plain one is tests/conftest.py's ``registry``), a bearer-token
server and a TLS server requiring client certificates (made with the openssl command)."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from registry_server import RegistryServerHandle, start_registry_server

SCHEMA_BODY = {
    "schema": 'syntax = "proto3"; package tiny; message T { string s = 1; }',
    "schemaType": "PROTOBUF",
}


@pytest.fixture
def auth_registry() -> Iterator[RegistryServerHandle]:
    handle = start_registry_server(port=0, users={"alice": "s3cret-pw"})
    yield handle
    handle.stop()


@pytest.fixture
def text_only_registry() -> Iterator[RegistryServerHandle]:
    handle = start_registry_server(port=0, ignore_format_serialized=True)
    yield handle
    handle.stop()


class _TinyHandler(BaseHTTPRequestHandler):
    """Answers GET /schemas/ids/1 when the request carries the expected Authorization."""

    expected_auth: str | None = None
    seen: list[dict[str, str]] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.seen.append(dict(self.headers))
        if (
            self.expected_auth is not None
            and self.headers.get("Authorization") != self.expected_auth
        ):
            self._send(401, {"error_code": 40101, "message": "Unauthorized"})
        elif self.path.split("?")[0] == "/schemas/ids/1":
            self._send(200, SCHEMA_BODY)
        else:
            self._send(404, {"error_code": 40403, "message": "Schema not found"})

    def _send(self, status: int, body: object) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _serve(handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext | None = None):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def bearer_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    handler = type("Bearer", (_TinyHandler,), {"expected_auth": "Bearer tok-123", "seen": []})
    server, thread = _serve(handler)
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    server.shutdown()
    server.server_close()
    thread.join(5)


class _MalformedReferences(_TinyHandler):
    """Answers schema 1 with a reference lacking its subject, 2 with version "latest"."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0]
        if path == "/schemas/ids/1":
            self._send(200, {**SCHEMA_BODY, "references": [{"name": "x.proto"}]})
        elif path == "/schemas/ids/2":
            ref = {"name": "x.proto", "subject": "x.proto", "version": "latest"}
            self._send(200, {**SCHEMA_BODY, "references": [ref]})
        else:
            self._send(404, {"error_code": 40403, "message": "Schema not found"})


@pytest.fixture
def malformed_references_server() -> Iterator[str]:
    server, thread = _serve(_MalformedReferences)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=protolake test CA",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            cwd=d,
        )
    return d


@pytest.fixture
def tls_server(certs) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    context.load_verify_locations(certs / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED  # the client must present a certificate
    handler = type("Tls", (_TinyHandler,), {"expected_auth": None, "seen": []})
    server, thread = _serve(handler, context)
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)
