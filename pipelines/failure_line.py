"""One line that says why a command failed, for a person at a terminal.

A failure inside Spark reaches the driver wrapped: a streaming query's
``StreamingQueryException`` carries the Python traceback of the ``foreachBatch`` function that
raised, itself inside a JVM stack, and a Py4J error carries the JVM's exception chain. The cause
a person needs (``codec.errors.RegistryUnavailable: registry at ... unavailable``) is one line
deep inside hundreds. :func:`failure_line` finds it: the last Python exception line of the text,
else the root of the JVM chain, else the text's first line.
"""

from __future__ import annotations

import re

from pipelines.settings.redaction import redact_url

MAX_LENGTH = 400
# "package.module.Name: message" of a Python traceback's last line (no JVM class names)
_PYTHON_ERROR = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Unavailable|Refused|Timeout)\w*): (.+)$"
)
_JVM_PREFIXES = ("org.", "java.", "javax.", "scala.", "io.", "com.", "kafka.", "py4j.")
# what Spark puts before a streaming query's cause
_STREAM_FAILED = re.compile(r"terminated with exception: (.+)$")


def failure_line(exc: BaseException) -> str:
    """``Name: message`` of the cause of ``exc`` (see the module docstring), one line of at
    most :data:`MAX_LENGTH` characters, a URL's ``user:password@`` hidden."""
    text = str(exc)
    line = _python_cause(text) or _jvm_root(exc) or _named(exc, _first_line(text))
    line = redact_url(line)
    if len(line) > MAX_LENGTH:
        line = line[: MAX_LENGTH - 3] + "..."
    return line


def _named(exc: BaseException, line: str) -> str:
    """``line`` with the name of ``exc``'s type before it (unless it names one already)."""
    name = type(exc).__name__
    if not line:
        return name
    return line if _PYTHON_ERROR.match(line) else f"{name}: {line}"


def _python_cause(text: str) -> str | None:
    found = None
    for raw in text.splitlines():
        match = _PYTHON_ERROR.match(raw.strip())
        if match and not match.group(1).startswith(_JVM_PREFIXES):
            found = f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2).strip()}"
    return found


def _jvm_root(exc: BaseException) -> str | None:
    """The message of the innermost exception of a Py4J error's JVM chain."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    try:
        while java.getCause() is not None and java.getCause() != java:
            java = java.getCause()
        return _first_line(str(java.toString()))
    except Exception:  # noqa: BLE001 - the gateway may be gone; the text is enough then
        return None


def _first_line(text: str) -> str:
    for raw in text.splitlines():
        line = raw.strip()
        if line:
            stream = _STREAM_FAILED.search(line)
            return stream.group(1) if stream else line
    return ""
