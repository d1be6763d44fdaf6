"""GET JSON from a registry over HTTP: timeouts, retries with backoff and jitter, TLS.

Every request has an explicit (connect, read) timeout. Connection errors, timeouts and HTTP
408, 429 and 5xx (`codec.http_errors.RETRY_STATUSES`) are retried `max_retries` times with
exponential backoff and "equal jitter" (`Backoff`), honouring a `Retry-After` in seconds of at
most the backoff's maximum; each retry is logged as a warning. When the retries are spent,
`RegistryUnavailable`. Any other outcome becomes its codec error through `codec.http_errors`
at once (a refusal is not retried). Credentials are applied to the session by
`codec.http_auth.RegistryAuth`, and every text of a library passes its `redact`.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from . import http_errors
from .http_auth import RegistryAuth, RegistrySession

log = logging.getLogger(__name__)

_ACCEPT = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; qs=0.9, "
    "application/json; qs=0.5"
)


@dataclass(frozen=True)
class Backoff:
    """Delay n is about `initial * 2**n` seconds, jittered, capped at `maximum`."""

    initial: float = 0.2
    maximum: float = 5.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before retry `attempt + 1`; a numeric `Retry-After` wins (capped)."""
        if retry_after is not None:
            try:
                seconds = float(retry_after)
            except ValueError:
                seconds = math.nan  # an HTTP date: fall back to our own backoff
            if math.isfinite(seconds):
                return min(max(seconds, 0.0), self.maximum)
        cap = min(self.maximum, self.initial * (2**attempt))
        return cap / 2 + random.uniform(0, cap / 2)  # "equal jitter"


@dataclass(frozen=True)
class TlsOptions:
    """How the server is verified and how we prove who we are.

    `ca_bundle` (a path) wins over `verify` (False disables verification: tests only);
    `client_cert` is a PEM with its key, or (cert, key) paths. Paths must exist.
    """

    ca_bundle: str | None = None
    client_cert: str | tuple[str, str] | None = None
    verify: bool = True

    def check(self) -> None:
        """Raise `ValueError` naming a TLS file that does not exist."""
        for what, path in (("CA bundle", self.ca_bundle), ("client certificate", self.client_cert)):
            for one in (path,) if isinstance(path, str) else (path or ()):
                if not os.path.exists(one):
                    raise ValueError(f"{what} {one!r} does not exist")


class HttpTransport:
    """GETs of JSON documents under one registry URL, with retries (module docstring)."""

    def __init__(
        self,
        auth: RegistryAuth,
        *,
        tls: TlsOptions,
        timeout: tuple[float, float],
        max_retries: int,
        backoff: Backoff,
        params: dict[str, str] | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        tls.check()
        self.url = auth.url
        self._auth = auth
        self._session = session if session is not None else RegistrySession()
        self._session.headers["Accept"] = _ACCEPT
        auth.apply(self._session)
        # Passed on every request, not set on the session: requests lets REQUESTS_CA_BUNDLE
        # override a session's `verify` (psf/requests#3829), which would drop our CA bundle.
        self._verify: bool | str = tls.ca_bundle if tls.ca_bundle is not None else tls.verify
        self._cert = tls.client_cert
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._params = params
        self._sleep = sleep

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()

    def get_json(self, path: str, ids: dict[str, Any]) -> Any:
        """GET `path` with retries; return the decoded JSON of a 200.

        Raises:
            UnknownSchema, RegistryUnavailable: as `codec.http_errors` maps the outcome.
        """
        last_problem = ""
        last_status: int | None = None
        for attempt in range(self._max_retries + 1):
            retry_after = None
            try:
                response = self._get(path)
            except requests.exceptions.SSLError as exc:
                raise http_errors.tls_failure(self.url, exc, ids, self._auth.redact) from None
            except requests.RequestException as exc:
                last_problem = self._auth.redact(http_errors.describe_request_error(exc))
                last_status = None
            else:
                status = response.status_code
                if status == 200:
                    return _json_of(response, path, ids)
                if status not in http_errors.RETRY_STATUSES:
                    raise http_errors.status_error(
                        self.url, path, status, response, ids, self._auth.redact
                    )
                last_problem = http_errors.retry_problem(status, response)
                last_status = status
                retry_after = response.headers.get("Retry-After")
            if attempt < self._max_retries:
                self._wait(path, attempt, last_problem, retry_after)
        raise http_errors.retries_spent(
            self.url, path, self._max_retries + 1, last_problem, last_status, ids
        )

    def _get(self, path: str) -> requests.Response:
        return self._session.get(
            self.url + path,
            params=self._params,
            timeout=self._timeout,
            verify=self._verify,
            cert=self._cert,
        )

    def _wait(self, path: str, attempt: int, problem: str, retry_after: str | None) -> None:
        delay = self._backoff.delay(attempt, retry_after)
        log.warning(
            "registry GET %s failed (%s); retry %d of %d in %.2fs",
            path,
            problem,
            attempt + 1,
            self._max_retries,
            delay,
        )
        self._sleep(delay)


def _json_of(response: requests.Response, path: str, ids: dict[str, Any]) -> Any:
    try:
        return response.json()
    except ValueError:
        raise http_errors.invalid_json(path, response.status_code, ids) from None
