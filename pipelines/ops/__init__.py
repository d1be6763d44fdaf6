"""Operating protolake: ``protolake replay|status|audit|maintain`` (one module each).

Shared helpers (sessions, Kafka client settings, output, progress bars) live in
:mod:`pipelines.ops.common`. Every command prints a table for people and, with ``--json``,
one JSON document on stdout for scripts; progress goes to stderr.
"""
