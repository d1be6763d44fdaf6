"""A loggable view of the configuration: every value whose key looks secret is ``***``.

Keys that name a password, secret, token, JAAS config, auth setting, key or credential have
their (non-empty) string values replaced; ``user:password@`` inside a URL is replaced too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

_SECRET_KEY = re.compile(r"(pass|secret|token|jaas|auth|key|credential)", re.IGNORECASE)


def redacted_view(config: Any) -> dict[str, Any]:
    """``config`` (a dataclass of dataclasses) as plain dicts and lists, secrets replaced."""
    return _redact(_as_dict(config))


def _as_dict(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _as_dict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _as_dict(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_as_dict(v) for v in obj]
    return obj


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        return {k: _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if isinstance(value, str) and value and _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, str):
        return redact_url(value)
    return value


# a URL's user info: everything from the scheme to the last "@" before the path, so that a
# password holding "@" is hidden whole (one holding "/" must be percent-encoded to be a URL)
_USER_INFO = re.compile(r"://[^/\s]*@")


def redact_url(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@``."""
    return _USER_INFO.sub("://***@", text) if "://" in text and "@" in text else text
