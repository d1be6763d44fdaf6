"""Credentials of the HTTP registry client: where they come from, how they are sent, redaction.

Basic auth is given as "user:pass", as (user, pass) or inside the URL ("http://user:pass@host",
percent-encoded); `basic_auth` overrides credentials in the URL. A bearer token is the other
kind (not together with basic auth). Credentials live only in the `Authorization` header the
`requests.Session` puts on each request (`RegistryAuth.apply`); the URL kept, logged and shown
in errors and `repr` has them removed (`RegistryAuth.url`), and `RegistryAuth.redact` removes
every secret (user, password, token, and the header value as sent, base64 and all) from any
text a library or a server produced.

Raises `ValueError` (one line, never the secret) for a URL that is not http(s) with a host, a
password that ends the host early, basic auth not written USER:PASS, both kinds at once, and a
bearer token outside RFC 6750's b64token alphabet.
"""

from __future__ import annotations

import base64
import re
import types
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
import requests.auth

_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750's b64token


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
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


def parse_basic_auth(basic_auth: str | tuple[str, str]) -> tuple[str, str]:
    """(user, password) of "user:pass" or of a pair."""
    if isinstance(basic_auth, tuple):
        return basic_auth
    user, sep, password = basic_auth.partition(":")
    if not sep:
        raise ValueError("basic auth must be given as USER:PASS")
    return user, password


class RegistryAuth:
    """The clean URL of a registry, the `Authorization` header for it, and its redaction.

    Args:
        url: base URL; may carry "user:pass@".
        basic_auth: "user:pass" or (user, pass); overrides credentials in the URL.
        bearer_token: sent as "Authorization: Bearer ..." (not together with basic auth).
    """

    def __init__(
        self,
        url: str,
        basic_auth: str | tuple[str, str] | None = None,
        bearer_token: str | None = None,
    ) -> None:
        self.url, url_creds = split_credentials(url)
        creds = parse_basic_auth(basic_auth) if basic_auth is not None else url_creds
        if creds is not None and bearer_token is not None:
            raise ValueError("give either basic auth or a bearer token, not both")
        if bearer_token is not None and not _TOKEN68.fullmatch(bearer_token):
            raise ValueError("bearer token must be letters, digits and -._~+/ (then '=')")
        self.kind = "basic" if creds else ("bearer" if bearer_token else None)
        self._authorization = _authorization(creds, bearer_token)
        # Strings that must never leave this object, whatever a library puts in a message.
        secrets = [s for s in (*(creds or ()), bearer_token) if s]
        if self._authorization is not None:
            secrets.append(self._authorization.split(" ", 1)[1])  # as sent, base64 and all
        self._secrets = sorted(secrets, key=len, reverse=True)  # "pass" inside "passphrase"

    def __repr__(self) -> str:
        return f"RegistryAuth(url={self.url!r}, kind={self.kind!r})"

    def apply(self, session: requests.Session) -> None:
        """Make `session` send these credentials (and no others) on every request: none when
        none are configured. Set as the session's `auth`, they also keep requests from taking
        credentials of `~/.netrc` (`NETRC`) for the registry's host, which it does for a
        session without one, replacing the `Authorization` header.

        A caller's own session (not a :class:`RegistrySession`) gets the same redirect rule:
        its redirects never take the netrc entry either."""
        session.headers.pop("Authorization", None)
        session.auth = _Authorization(self._authorization)
        if not isinstance(session, RegistrySession):
            session.rebuild_auth = types.MethodType(  # type: ignore[method-assign]
                _keep_configured_auth, session
            )

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by "***"."""
        for secret in self._secrets:
            if len(secret) >= 8:
                text = text.replace(secret, "***")
            else:  # a short one only where it stands alone, not inside ordinary words
                pattern = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
                text = re.sub(pattern, "***", text)
        return text


def _authorization(creds: tuple[str, str] | None, bearer_token: str | None) -> str | None:
    """The `Authorization` header value, or None without credentials."""
    if creds is not None:
        # UTF-8 (RFC 7617): requests would encode Latin-1 and fail on any other character
        token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")
        return f"Basic {token}"
    if bearer_token is not None:
        return f"Bearer {bearer_token}"
    return None


class RegistrySession(requests.Session):
    """A ``requests.Session`` whose redirects never take credentials of ``~/.netrc``: a
    redirect to another host drops the ``Authorization`` header (as requests does), one to the
    same host keeps the configured one (requests put the netrc entry for the host instead)."""

    def rebuild_auth(
        self, prepared_request: requests.PreparedRequest, response: requests.Response
    ) -> None:
        _keep_configured_auth(self, prepared_request, response)


def _keep_configured_auth(
    session: requests.Session,
    prepared_request: requests.PreparedRequest,
    response: requests.Response,
) -> None:
    """A redirect's ``rebuild_auth`` without netrc: drop the header on another host, keep it
    on the same one."""
    headers, url = prepared_request.headers, prepared_request.url
    if "Authorization" in headers and session.should_strip_auth(response.request.url, url):
        del headers["Authorization"]


class _Authorization(requests.auth.AuthBase):
    """Puts one `Authorization` header on a request (none: removes any)."""

    def __init__(self, value: str | None) -> None:
        self._value = value

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._value is None:
            request.headers.pop("Authorization", None)
        else:
            request.headers["Authorization"] = self._value
        return request

    def __repr__(self) -> str:
        return "_Authorization(***)"
