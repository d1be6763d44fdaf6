"""HTTP outcomes of a registry request as codec errors: the one place they become `CodecError`s.

    404 with a Confluent error code (4040x: 40401 subject, 40402 version,
        40403 schema), or a 404 for an id above 2^31-1                        -> UnknownSchema
    401, 403, TLS failures, invalid JSON, other statuses, retries spent,
        a 404 without a Confluent error body (a wrong URL, not a missing schema) -> RegistryUnavailable

`RETRY_STATUSES` (408, 429, 5xx) are the statuses worth another attempt. Messages name the
registry's clean URL and the path; text that came from a server or a library passes the
caller's `redact` first, so no credential reaches an error. `ids` carries the `schema_id` and
`schema_guid` of the request into the error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import requests

from .errors import CodecError, RegistryUnavailable, UnknownSchema

RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+")


def describe_request_error(exc: requests.RequestException) -> str:
    """A short cause ("[Errno 111] Connection refused", "read timed out"), no URL."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, requests.exceptions.Timeout):
        return "read timed out"
    found = _ERRNO.search(str(exc))
    if found:
        return f"{type(exc).__name__}: {found.group(0).strip()}"
    return type(exc).__name__


def error_body(response: requests.Response) -> tuple[int | None, str]:
    """Confluent error bodies are {"error_code": 40403, "message": "..."}."""
    try:
        body = response.json()
    except ValueError:
        return None, ""
    if not isinstance(body, dict):
        return None, ""
    code = body.get("error_code")
    return (code if isinstance(code, int) else None), str(body.get("message", ""))


def tls_failure(
    url: str, exc: requests.exceptions.SSLError, ids: dict[str, Any], redact: Callable[[str], str]
) -> RegistryUnavailable:
    """The TLS handshake failed (not retried: a retry would fail the same way)."""
    return RegistryUnavailable(
        redact(f"TLS handshake with the registry at {url} failed: {exc}"), **ids
    )


def invalid_json(path: str, status: int, ids: dict[str, Any]) -> RegistryUnavailable:
    """A 200 whose body is not JSON."""
    return RegistryUnavailable(
        f"registry answered GET {path} with invalid JSON", http_status=status, **ids
    )


def retries_spent(
    url: str,
    path: str,
    attempts: int,
    last_problem: str,
    last_status: int | None,
    ids: dict[str, Any],
) -> RegistryUnavailable:
    """Every attempt failed with a retryable problem; `last_problem` is already redacted."""
    return RegistryUnavailable(
        f"registry at {url} unavailable: GET {path} failed {attempts} times, last: {last_problem}",
        http_status=last_status,
        **ids,
    )


def status_error(
    url: str,
    path: str,
    status: int,
    response: requests.Response,
    ids: dict[str, Any],
    redact: Callable[[str], str],
) -> CodecError:
    """The error for a status that is neither 200 nor retried."""
    error_code, error_message = error_body(response)
    detail = redact(error_message)[:300]
    common: dict[str, Any] = {"http_status": status, "registry_error_code": error_code, **ids}
    if status == 404 and error_code is not None and 40400 <= error_code < 40500:
        return UnknownSchema(
            f"registry has no schema for GET {path} ({error_code}: {detail})", **common
        )
    if status in (401, 403):
        problem = "refused the credentials" if status == 401 else "denied access"
        return RegistryUnavailable(
            f"registry at {url} {problem} (HTTP {status}) for GET {path}", **common
        )
    if status == 404 and (ids["schema_id"] or 0) >= 2**31:
        # Confluent's ids are Java ints: a larger one is not even a path it routes, and
        # its 404 says so without an error code of ours. No registry has this schema.
        return UnknownSchema(
            f"registry has no schema for GET {path} (HTTP 404: ids above 2^31-1 do not "
            "exist in a Confluent registry)",
            **common,
        )
    hint = ""
    if status == 404:
        hint = (
            " (no Confluent error body: is the registry URL right?)"
            if error_code is None
            else " (not a Confluent 4040x code: is the registry URL right?)"
        )
    return RegistryUnavailable(
        f"registry at {url} answered GET {path} with HTTP {status}"
        + (f" {error_code}: {detail}" if error_code else "")
        + hint,
        **common,
    )


def retry_problem(status: int, response: requests.Response) -> str:
    """A retryable status as the short cause shown in the log and the final error."""
    error_code, _ = error_body(response)
    return f"HTTP {status}" + (f" {error_code}" if error_code else "")
