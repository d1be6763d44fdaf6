"""Compatibility configuration: the global level and the per-subject levels.

Confluent's ``/config`` resources store a compatibility level; this server stores and reports
it the way Confluent does, but never enforces it (no schema is rejected as incompatible).
Errors: 42203 invalid level, 40408 no subject-level level set, 40401 nothing to delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import RegistryError, subject_not_found

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"  # Confluent's default


@dataclass
class CompatibilityConfig:
    """The levels; not thread-safe by itself (the store calls it under its lock)."""

    global_level: str = DEFAULT_LEVEL
    subject_levels: dict[str, str] = field(default_factory=dict)

    def level_of(self, subject: str, *, default_to_global: bool) -> str:
        """GET /config/{subject}: its level, or the global one when asked to fall back."""
        level = self.subject_levels.get(subject)
        if level is not None:
            return level
        if default_to_global:
            return self.global_level
        raise RegistryError(
            404,
            40408,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )

    def set_level(self, subject: str | None, body: Any) -> str:
        """PUT /config[/{subject}] with ``{"compatibility": level}``; returns the level."""
        level = str((body or {}).get("compatibility", "")).upper()
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level")
        if subject is None:
            self.global_level = level
        else:
            self.subject_levels[subject] = level
        return level

    def delete_level(self, subject: str) -> str:
        """DELETE /config/{subject}: drop its level; returns the level it had."""
        level = self.subject_levels.pop(subject, None)
        if level is None:
            raise subject_not_found(subject)
        return level
