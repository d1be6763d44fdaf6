"""HTTP: Confluent's REST paths routed to the store, answers as Confluent writes them.

Every answer is JSON with content type ``application/vnd.schemaregistry.v1+json``; an error
is ``{"error_code": N, "message": "..."}`` (`RegistryError`), an unexpected exception 500
with code 50001 (never a dropped connection). Before routing, the handler records the
request, checks HTTP basic auth (401, code 40101) and applies injected faults (a delay,
then an error with code status*100+3). Path segments are URL-decoded after splitting, so a
subject's ``/`` (sent as %2F) stays in one segment.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import RegistryError, not_found, schema_not_found
from .store import SCHEMA_TYPES, SchemaStore, StoredSchema, SubjectVersion

log = logging.getLogger("protolake.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class Fault:
    """An injected fault: the next `remaining` requests wait `delay`, then get `status`."""

    remaining: int
    status: int = 503
    delay: float = 0.0


@dataclass
class ServerState:
    """What the handler threads share: the store, options, faults and the request log."""

    store: SchemaStore
    users: dict[str, str] | None = None
    ignore_format_serialized: bool = False
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_fault(self) -> Fault | None:
        with self.lock:
            while self.faults and self.faults[0].remaining <= 0:
                self.faults.pop(0)
            if not self.faults:
                return None
            fault = self.faults[0]
            fault.remaining -= 1
            return fault


@dataclass
class Request:
    """One parsed request: method, decoded path segments, query (last value wins), body."""

    method: str
    parts: list[str]
    query: dict[str, str]
    body: Any

    def flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"


class RegistryRequestHandler(BaseHTTPRequestHandler):
    """Routes Confluent's REST paths to the store; answers JSON or a Confluent error body."""

    server_version = "protolake-registry/1"
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, 40 ms on every answer of a kept-alive connection.
    disable_nagle_algorithm = True
    state: ServerState  # set on a subclass per server by start_registry_server

    # -- plumbing
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        # The request line only (never headers: they carry the Authorization secret).
        log.info("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send_error(self, err: RegistryError, headers: Mapping[str, str] | None = None) -> None:
        self._send(err.status, {"error_code": err.error_code, "message": err.message}, headers)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RegistryError(400, 400, "Unrecognized JSON body") from None

    def _authorized(self) -> bool:
        users = self.state.users
        if not users:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = users.get(user)
        return expected is not None and hmac.compare_digest(expected, password)

    def _faulted(self) -> bool:
        """Apply the next injected fault, if any; True when it answered the request."""
        fault = self.state.next_fault()
        if fault is None:
            return False
        if fault.delay:
            time.sleep(fault.delay)
        if not fault.status:
            return False
        self._send_error(RegistryError(fault.status, fault.status * 100 + 3, "injected fault"))
        return True

    def _handle(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        # Split before decoding: a subject's '/' arrives as %2F and must stay in one segment.
        parts = [unquote(p) for p in url.path.split("/") if p]
        with self.state.lock:
            self.state.requests.append((self.command, url.path))
        body = self._read_body() if self.command in ("POST", "PUT") else None
        if not self._authorized():
            self._send_error(
                RegistryError(401, 40101, "Unauthorized"),
                {"WWW-Authenticate": 'Basic realm="schema-registry"'},
            )
            return
        if self._faulted():
            return
        try:
            status, result = 200, route(self.state, Request(self.command, parts, query, body))
        except RegistryError as err:
            self._send_error(err)
            return
        except Exception as exc:  # a bug here must answer 500, not drop the connection
            log.exception("internal error")
            self._send_error(RegistryError(500, 50001, f"Error in the backend data store: {exc}"))
            return
        self._send(status, result)

    do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 - stdlib naming


# -- routes: each returns the JSON body of a 200 answer or raises RegistryError


def route(state: ServerState, req: Request) -> Any:
    """Answer one request (every success is a 200)."""
    head = req.parts[0] if req.parts else ""
    if not req.parts and req.method == "GET":
        return {}
    if head == "schemas" and req.method == "GET":
        return _route_schemas(state, req)
    if head == "subjects":
        return _route_subjects(state, req)
    if head == "config":
        return _route_config(state.store, req)
    if head == "mode" and req.method == "GET":
        return {"mode": "READWRITE"}
    if head == "contexts" and req.method == "GET" and len(req.parts) == 1:
        return ["."]
    raise not_found()


def _route_schemas(state: ServerState, req: Request) -> Any:
    """GET /schemas/types, /schemas/{ids|guids}/{key}[/schema|/subjects|/versions]."""
    parts, n = req.parts, len(req.parts)
    if n == 2 and parts[1] == "types":
        return list(SCHEMA_TYPES)
    if n < 3 or parts[1] not in ("ids", "guids"):
        raise not_found()
    stored = _schema_by_key(state.store, parts[1], parts[2])
    fmt = req.query.get("format")
    if n == 3:
        return {**schema_body(state, stored, fmt), "guid": stored.guid}
    if n == 4 and parts[3] == "schema":
        return schema_body(state, stored, fmt)["schema"]
    if n == 4 and parts[3] in ("subjects", "versions"):
        pairs = state.store.versions_of_schema(stored.id, deleted=req.flag("deleted"))
        if parts[3] == "subjects":
            return sorted({s for s, _ in pairs})
        return [{"subject": s, "version": v} for s, v in pairs]
    raise not_found()


def _schema_by_key(store: SchemaStore, kind: str, key: str) -> StoredSchema:
    if kind == "guids":
        return store.get_schema_by_guid(key)
    try:
        return store.get_schema(int(key))
    except ValueError:
        raise schema_not_found() from None


def _route_subjects(state: ServerState, req: Request) -> Any:
    """/subjects, /subjects/{s} (lookup, delete), /subjects/{s}/versions[/{v}[/...]]."""
    store, parts, n, method = state.store, req.parts, len(req.parts), req.method
    deleted, permanent = req.flag("deleted"), req.flag("permanent")
    if n == 1 and method == "GET":
        return store.subject_names(req.query.get("subjectPrefix", ""), deleted=deleted)
    if n == 2 and method == "POST":
        sv = store.lookup(parts[1], req.body, deleted=deleted)
        return version_body(state, sv, req.query.get("format"))
    if n == 2 and method == "DELETE":
        return store.delete_subject(parts[1], permanent=permanent)
    if n < 3 or parts[2] != "versions":
        raise not_found()
    subject = parts[1]
    if n == 3 and method == "GET":
        return [v.version for v in store.live_versions(subject, deleted=deleted)]
    if n == 3 and method == "POST":
        stored = store.register(subject, req.body)
        return {"id": stored.id, "guid": stored.guid}
    if n == 4 and method == "DELETE":
        return store.delete_version(subject, parts[3], permanent=permanent)
    if n >= 4 and method == "GET":
        sv = store.get_version(subject, parts[3], deleted=deleted)
        if n == 4:
            return version_body(state, sv, req.query.get("format"))
        if n == 5 and parts[4] == "schema":
            stored = store.get_schema(sv.schema_id)
            return schema_body(state, stored, req.query.get("format"))["schema"]
        if n == 5 and parts[4] == "referencedby":
            return store.referenced_by(subject, sv.version)
    raise not_found()


def _route_config(store: SchemaStore, req: Request) -> Any:
    """GET|PUT /config, GET|PUT|DELETE /config/{subject}."""
    n, method = len(req.parts), req.method
    subject = req.parts[1] if n == 2 else None
    if n == 1 and method == "GET":
        return {"compatibilityLevel": store.compatibility_of(None)}
    if n in (1, 2) and method == "PUT":
        return {"compatibility": store.set_compatibility(subject, req.body)}
    if subject is not None and method == "GET":
        level = store.compatibility_of(subject, default_to_global=req.flag("defaultToGlobal"))
        return {"compatibilityLevel": level}
    if subject is not None and method == "DELETE":
        return {"compatibilityLevel": store.delete_compatibility(subject)}
    raise not_found()


# -- response bodies


def schema_body(state: ServerState, stored: StoredSchema, fmt: str | None) -> dict[str, Any]:
    """The schema fields of a response, in the format asked for (``serialized`` or text)."""
    if stored.schema_type == "PROTOBUF":
        serialized = fmt == "serialized" and not state.ignore_format_serialized
        if serialized and stored.serialized is not None:
            schema = stored.serialized
        else:
            schema = stored.text if stored.text is not None else stored.schema
    else:
        schema = stored.schema
    body: dict[str, Any] = {}
    if stored.schema_type != "AVRO":
        body["schemaType"] = stored.schema_type
    body["schema"] = schema
    if stored.references:
        body["references"] = [dict(r) for r in stored.references]
    return body


def version_body(state: ServerState, sv: SubjectVersion, fmt: str | None) -> dict[str, Any]:
    """A subject version with its schema, as GET /subjects/{s}/versions/{v} answers it."""
    stored = state.store.get_schema(sv.schema_id)
    result: dict[str, Any] = {
        "subject": sv.subject,
        "version": sv.version,
        "id": stored.id,
        "guid": stored.guid,
    }
    result.update(schema_body(state, stored, fmt))
    return result
