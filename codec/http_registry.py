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
(`codec.http_answers`).

Answers are cached (bounded LRU, `codec.lru`): an id, a GUID or a subject/version number never
changes meaning ("latest" may move, so it is not cached). A 404 is remembered for
`negative_ttl` seconds only, since the schema may be registered later.

Each concern has its module: credentials and their redaction in `codec.http_auth` (the URL
kept, logged and shown in errors and `repr` has them removed), timeouts, retries with backoff
and TLS in `codec.http_transport`, HTTP outcomes to codec errors in `codec.http_errors`
(404 with a Confluent 4040x code -> `UnknownSchema`; 401, 403, TLS failures, other statuses,
a 404 without a Confluent error body, spent retries -> `RegistryUnavailable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote

import requests

from .errors import CodecError, UnknownSchema
from .http_answers import to_registered_schema
from .http_auth import RegistryAuth
from .http_transport import Backoff, HttpTransport, TlsOptions
from .lru import LruCache
from .registry import RegisteredSchema


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
        auth = RegistryAuth(url, basic_auth=basic_auth, bearer_token=bearer_token)
        self.url = auth.url
        self._auth_kind = auth.kind
        self._transport = HttpTransport(
            auth,
            tls=TlsOptions(ca_bundle=ca_bundle, client_cert=client_cert, verify=verify),
            timeout=(connect_timeout, read_timeout),
            max_retries=max_retries,
            backoff=Backoff(backoff_initial, backoff_max),
            params={"format": request_format} if request_format else None,
            session=session,
            sleep=sleep,
        )
        self._negative_ttl = negative_ttl
        self._cache = LruCache(cache_size)

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
        self._transport.close()

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
        ids = {"schema_id": schema_id, "schema_guid": schema_guid}
        try:
            body = self._transport.get_json(path, ids)
        except UnknownSchema as exc:
            self._cache.put(cache_key, exc.copy(), ttl=self._negative_ttl)
            raise
        schema = to_registered_schema(body, schema_id=schema_id, schema_guid=schema_guid)
        if not (cache_key[0] == "subject" and not _fixed_version(cache_key[2])):
            self._cache.put(cache_key, schema)  # "latest" (or -1) may move; numbers never do
        return schema


def _fixed_version(version: object) -> bool:
    """A subject's version that names one schema for good: a number from 1 ("latest" and -1,
    which the registry reads as latest, move)."""
    return isinstance(version, int) and not isinstance(version, bool) and version >= 1
