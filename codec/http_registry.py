"""A Confluent Schema Registry client over HTTP (`requests`), resilient and credential-safe.

Endpoints (Confluent Schema Registry API reference):
    GET /schemas/ids/{id}
    GET /schemas/guids/{guid}
    GET /subjects/{subject}/versions/{version}
Subjects are percent-encoded whole (`shop/common.proto` -> `shop%2Fcommon.proto`). We ask for
the schema as registered: .proto text, which `codec.descriptors` compiles with its source info,
so the .proto comments reach silver's table and column comments. `request_format="serialized"`
asks for a base64 `FileDescriptorProto` instead (`?format=serialized`; no comments: a registry
builds it without source info). Which one came back is detected from the answer
(`RegisteredSchema.format`).

Resilience: every request has an explicit (connect, read) timeout. Connection errors, timeouts
and HTTP 408, 429 and 5xx are retried with exponential backoff and jitter (honouring a
`Retry-After` of at most `backoff_max`); when the retries are spent, `RegistryUnavailable`.
This module is the one place where `requests` errors and HTTP statuses become codec errors:
    404 with a Confluent error code (40401 subject, 40402 version, 40403 schema) -> UnknownSchema
    401, 403, TLS failures, other statuses, a 404 without a Confluent error body
        (a wrong URL, not a missing schema)                                     -> RegistryUnavailable
Answers are cached (bounded LRU): an id, a GUID or a subject/version never changes meaning.
A 404 is remembered for `negative_ttl` seconds only, since the schema may be registered later.

Credentials (basic auth given as "user:pass" or inside the URL, or a bearer token) live only in
the `requests.Session`; the URL kept, logged and shown in errors and `repr` has them removed.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import os
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import requests
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from .errors import CodecError, RegistryUnavailable, UnknownSchema
from .registry import DEFAULT_SCHEMA_TYPE, RegisteredSchema, SchemaReference

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
UNKNOWN_SCHEMA_ERROR_CODES = frozenset({40401, 40402, 40403})
_ACCEPT = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; qs=0.9, "
    "application/json; qs=0.5"
)
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750's b64token


def detect_schema_format(schema: str) -> str:
    """Return "serialized" when `schema` is a base64 `FileDescriptorProto`, else "text"."""
    if not schema or not _BASE64.fullmatch(schema):
        return "text"  # .proto text always has spaces, quotes or semicolons
    try:
        descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return "text"
    return "serialized"


def _split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """Remove `user:pass@` from a URL; return the clean URL and the credentials."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("registry URL must be http:// or https:// with a host")
    if "@" in url[url.index(parts.netloc) + len(parts.netloc) :]:
        # "http://svc:pa/ss@host": a password with "/", "?" or "#" not percent-encoded ends
        # the host early; the rest would be kept, shown and logged as a path
        raise ValueError(
            "registry URL has an '@' after its host: percent-encode '/', '?' and '#' in a "
            "password inside a URL, or give the credentials apart (--registry-user)"
        )
    if parts.username is None and parts.password is None:
        return url.rstrip("/"), None
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    creds = (unquote(parts.username or ""), unquote(parts.password or ""))
    return clean.rstrip("/"), creds


def _parse_basic_auth(basic_auth: str | tuple[str, str]) -> tuple[str, str]:
    if isinstance(basic_auth, tuple):
        return basic_auth
    user, sep, password = basic_auth.partition(":")
    if not sep:
        raise ValueError("basic auth must be given as USER:PASS")
    return user, password


class _Lru:
    """A small thread-safe LRU map with optional per-entry expiry."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._data: OrderedDict[object, tuple[float | None, object]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: object) -> object | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            expires, value = entry
            if expires is not None and expires < time.monotonic():
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    def put(self, key: object, value: object, ttl: float | None = None) -> None:
        with self._lock:
            expires = None if ttl is None else time.monotonic() + ttl
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max_size:
                self._data.popitem(last=False)


class HttpSchemaRegistry:
    """`SchemaRegistry` over Confluent's REST API.

    Args:
        url: base URL, e.g. "http://127.0.0.1:8081"; may carry "user:pass@".
        basic_auth: "user:pass" or (user, pass); overrides credentials in the URL.
        bearer_token: sent as "Authorization: Bearer ..." (not together with basic auth).
        ca_bundle: path of a CA bundle to verify the server with.
        client_cert: path of a client certificate (PEM with key) or (cert, key) paths.
        verify: False disables TLS verification (tests only).
        connect_timeout, read_timeout: seconds, per request.
        max_retries: retries after the first attempt, on retryable failures.
        backoff_initial, backoff_max: seconds; delay n is about initial * 2**n, jittered, capped.
        cache_size: entries per cache (ids, GUIDs, subject versions).
        negative_ttl: seconds a 404 is remembered.
        request_format: None (the schema as registered: .proto text, comments included) or
            "serialized" (a base64 FileDescriptorProto, without the comments).
        session: a `requests.Session` to use (its auth and TLS settings are then replaced).
        sleep: the function used to wait between retries (tests pass a recorder).
    """

    def __init__(
        self,
        url: str,
        *,
        basic_auth: str | tuple[str, str] | None = None,
        bearer_token: str | None = None,
        ca_bundle: str | None = None,
        client_cert: str | tuple[str, str] | None = None,
        verify: bool = True,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_retries: int = 4,
        backoff_initial: float = 0.2,
        backoff_max: float = 5.0,
        cache_size: int = 1000,
        negative_ttl: float = 30.0,
        request_format: str | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url, url_creds = _split_credentials(url)
        creds = _parse_basic_auth(basic_auth) if basic_auth is not None else url_creds
        if creds is not None and bearer_token is not None:
            raise ValueError("give either basic auth or a bearer token, not both")
        if bearer_token is not None and not _TOKEN68.fullmatch(bearer_token):
            raise ValueError("bearer token must be letters, digits and -._~+/ (then '=')")
        for what, path in (("CA bundle", ca_bundle), ("client certificate", client_cert)):
            for one in (path,) if isinstance(path, str) else (path or ()):
                if not os.path.exists(one):
                    raise ValueError(f"{what} {one!r} does not exist")
        self._session = session if session is not None else requests.Session()
        self._session.headers["Accept"] = _ACCEPT
        self._auth_kind = "basic" if creds else ("bearer" if bearer_token else None)
        self._session.auth = None
        authorization = None
        if creds is not None:
            # UTF-8 (RFC 7617): requests would encode Latin-1 and fail on any other character
            token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")
            authorization = f"Basic {token}"
        elif bearer_token is not None:
            authorization = f"Bearer {bearer_token}"
        if authorization is not None:
            self._session.headers["Authorization"] = authorization
        else:
            self._session.headers.pop("Authorization", None)
        # Passed on every request, not set on the session: requests lets REQUESTS_CA_BUNDLE
        # override a session's `verify` (psf/requests#3829), which would drop our CA bundle.
        self._verify: bool | str = ca_bundle if ca_bundle is not None else verify
        self._cert = client_cert
        # Strings that must never leave this object, whatever a library puts in a message.
        self._secrets = [s for s in (*(creds or ()), bearer_token) if s]
        if authorization is not None:
            self._secrets.append(authorization.split(" ", 1)[1])  # as sent, base64 and all
        self._secrets.sort(key=len, reverse=True)  # "pass" inside "passphrase": longest first
        self._timeout = (connect_timeout, read_timeout)
        self._max_retries = max_retries
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._negative_ttl = negative_ttl
        self._format = request_format
        self._sleep = sleep
        self._cache = _Lru(cache_size)

    def __repr__(self) -> str:
        return f"HttpSchemaRegistry(url={self.url!r}, auth={self._auth_kind!r})"

    # -- the SchemaRegistry protocol ---------------------------------------------------------

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        """GET /schemas/ids/{id}."""
        return self._get_schema(
            ("id", schema_id), f"/schemas/ids/{int(schema_id)}", schema_id=schema_id
        )

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        """GET /schemas/guids/{guid}."""
        path = f"/schemas/guids/{quote(schema_guid, safe='')}"
        return self._get_schema(("guid", schema_guid), path, schema_guid=schema_guid)

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        """GET /subjects/{subject}/versions/{version}, the subject percent-encoded whole."""
        path = f"/subjects/{quote(subject, safe='')}/versions/{quote(str(version), safe='')}"
        return self._get_schema(("subject", subject, version), path)

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()

    # -- internals -----------------------------------------------------------------------------

    def _get_schema(
        self,
        cache_key: tuple[object, ...],
        path: str,
        *,
        schema_id: int | None = None,
        schema_guid: str | None = None,
    ) -> RegisteredSchema:
        cached = self._cache.get(cache_key)
        if isinstance(cached, RegisteredSchema):
            return cached
        if isinstance(cached, CodecError):
            raise cached.copy()
        try:
            body = self._request(path, schema_id=schema_id, schema_guid=schema_guid)
        except UnknownSchema as exc:
            self._cache.put(cache_key, exc.copy(), ttl=self._negative_ttl)
            raise
        schema = self._to_registered_schema(body, schema_id=schema_id, schema_guid=schema_guid)
        if not (cache_key[0] == "subject" and not isinstance(cache_key[2], int)):
            self._cache.put(cache_key, schema)  # "latest" may move; numbers never do
        return schema

    def _to_registered_schema(
        self, body: Any, *, schema_id: int | None, schema_guid: str | None
    ) -> RegisteredSchema:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryUnavailable(
                "registry answered without a 'schema' string", schema_id=schema_id
            )
        schema_type = body.get("schemaType") or DEFAULT_SCHEMA_TYPE
        try:
            references = tuple(
                SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                for r in body.get("references") or ()
            )
        except (KeyError, TypeError, ValueError):
            # the registry's fault, not the record's: fail the batch, never quarantine
            raise RegistryUnavailable(
                "registry answered with malformed references (each needs a name, a subject "
                "and a version number)",
                schema_id=schema_id,
                schema_guid=schema_guid,
            ) from None
        text = body["schema"]
        fmt = detect_schema_format(text) if schema_type == "PROTOBUF" else "text"
        version = body.get("version")
        return RegisteredSchema(
            schema=text,
            schema_type=str(schema_type),
            references=references,
            format="serialized" if fmt == "serialized" else "text",
            schema_id=body.get("id", schema_id),
            schema_guid=body.get("guid", schema_guid),
            subject=body.get("subject"),
            version=version if isinstance(version, int) else None,
        )

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if len(secret) >= 8:
                text = text.replace(secret, "***")
            else:  # a short one only where it stands alone, not inside ordinary words
                pattern = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
                text = re.sub(pattern, "***", text)
        return text

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                seconds = float(retry_after)
            except ValueError:
                seconds = math.nan  # an HTTP date: fall back to our own backoff
            if math.isfinite(seconds):
                return min(max(seconds, 0.0), self._backoff_max)
        cap = min(self._backoff_max, self._backoff_initial * (2**attempt))
        return cap / 2 + random.uniform(0, cap / 2)  # "equal jitter"

    def _request(
        self, path: str, *, schema_id: int | None = None, schema_guid: str | None = None
    ) -> Any:
        """GET `path` with retries; the one place HTTP outcomes become codec errors."""
        params = {"format": self._format} if self._format else None
        ids: dict[str, Any] = {"schema_id": schema_id, "schema_guid": schema_guid}
        last_problem = ""
        last_status: int | None = None
        for attempt in range(self._max_retries + 1):
            retry_after = None
            try:
                response = self._session.get(
                    self.url + path,
                    params=params,
                    timeout=self._timeout,
                    verify=self._verify,
                    cert=self._cert,
                )
            except requests.exceptions.SSLError as exc:
                raise RegistryUnavailable(
                    self._redact(f"TLS handshake with the registry at {self.url} failed: {exc}"),
                    **ids,
                ) from None
            except requests.RequestException as exc:
                last_problem = self._redact(_describe_request_error(exc))
                last_status = None
            else:
                status = response.status_code
                if status == 200:
                    try:
                        return response.json()
                    except ValueError:
                        raise RegistryUnavailable(
                            f"registry answered GET {path} with invalid JSON",
                            http_status=status,
                            **ids,
                        ) from None
                error_code, error_message = _error_body(response)
                if status not in RETRY_STATUSES:
                    raise self._error_for(path, status, error_code, error_message, ids)
                last_problem = f"HTTP {status}" + (f" {error_code}" if error_code else "")
                last_status = status
                retry_after = response.headers.get("Retry-After")
            if attempt < self._max_retries:
                delay = self._delay(attempt, retry_after)
                log.warning(
                    "registry GET %s failed (%s); retry %d of %d in %.2fs",
                    path,
                    last_problem,
                    attempt + 1,
                    self._max_retries,
                    delay,
                )
                self._sleep(delay)
        raise RegistryUnavailable(
            f"registry at {self.url} unavailable: GET {path} failed "
            f"{self._max_retries + 1} times, last: {last_problem}",
            http_status=last_status,
            **ids,
        )

    def _error_for(
        self,
        path: str,
        status: int,
        error_code: int | None,
        error_message: str,
        ids: dict[str, Any],
    ) -> CodecError:
        detail = self._redact(error_message)[:300]
        if status == 404 and error_code is not None and 40400 <= error_code < 40500:
            return UnknownSchema(
                f"registry has no schema for GET {path} ({error_code}: {detail})",
                http_status=status,
                registry_error_code=error_code,
                **ids,
            )
        if status in (401, 403):
            problem = "refused the credentials" if status == 401 else "denied access"
            return RegistryUnavailable(
                f"registry at {self.url} {problem} (HTTP {status}) for GET {path}",
                http_status=status,
                registry_error_code=error_code,
                **ids,
            )
        if status == 404 and (ids["schema_id"] or 0) >= 2**31:
            # Confluent's ids are Java ints: a larger one is not even a path it routes, and
            # its 404 says so without an error code of ours. No registry has this schema.
            return UnknownSchema(
                f"registry has no schema for GET {path} (HTTP 404: ids above 2^31-1 do not "
                "exist in a Confluent registry)",
                http_status=status,
                registry_error_code=error_code,
                **ids,
            )
        hint = ""
        if status == 404:
            hint = (
                " (no Confluent error body: is the registry URL right?)"
                if error_code is None
                else " (not a Confluent 4040x code: is the registry URL right?)"
            )
        return RegistryUnavailable(
            f"registry at {self.url} answered GET {path} with HTTP {status}"
            + (f" {error_code}: {detail}" if error_code else "")
            + hint,
            http_status=status,
            registry_error_code=error_code,
            **ids,
        )


_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+")


def _describe_request_error(exc: requests.RequestException) -> str:
    """A short cause ("[Errno 111] Connection refused", "read timed out"), no URL."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, requests.exceptions.Timeout):
        return "read timed out"
    found = _ERRNO.search(str(exc))
    if found:
        return f"{type(exc).__name__}: {found.group(0).strip()}"
    return type(exc).__name__


def _error_body(response: requests.Response) -> tuple[int | None, str]:
    """Confluent error bodies are {"error_code": 40403, "message": "..."}."""
    try:
        body = response.json()
    except ValueError:
        return None, ""
    if not isinstance(body, dict):
        return None, ""
    code = body.get("error_code")
    return (code if isinstance(code, int) else None), str(body.get("message", ""))
