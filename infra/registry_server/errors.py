"""The registry's errors: an HTTP status plus Confluent's ``error_code``, answered as JSON.

Codes follow Confluent's REST API reference: 40401 subject not found, 40402 version not
found, 40403 schema not found, 42201 invalid schema (the constructors below); the other codes
are raised where they arise.
"""

from __future__ import annotations


class RegistryError(Exception):
    """An error answered to the client as ``{"error_code", "message"}`` with an HTTP status."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def not_found() -> RegistryError:
    """A path no route answers (Confluent's own 404 body)."""
    return RegistryError(404, 404, "HTTP 404 Not Found")
