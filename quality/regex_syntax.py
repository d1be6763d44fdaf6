"""Whether a configured regular expression is one Spark's engine takes.

Spark evaluates regular expressions with Java's ``java.util.regex``, not Python's ``re``.
:func:`python_regex_error` compiles one with Python's ``re`` after replacing the constructs only
Java has (``\\p{Alpha}``, ``\\Q...\\E``, ``(?<name>...)``, ``\\h``, ``\\z``, ...), so it
catches what is broken in both (unbalanced brackets, a quantifier with nothing to repeat)
without rejecting valid Java, and needs no JVM (``quality.rules`` checks the configuration with
it). :func:`java_regex_error` asks Java's own engine, when a session is there.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Java-only regex constructs, rewritten before the Python pre-check (java.util.regex.Pattern's
# documentation lists them). Scanned left to right with any other escape as one token, so that
# an escaped backslash followed by a letter is never mistaken for an escape.
_JAVA_TOKENS = re.compile(
    r"\\Q.*?(?:\\E|$)"  # \Q...\E quotes literally
    r"|\\[pP](?:\{[^}]*\}|[A-Za-z])"  # \p{Alpha}, \pL: character classes
    r"|\\x\{[0-9A-Fa-f]+\}"  # \x{1F600}
    r"|\\c."  # control character
    r"|\\k<\w+>"  # named back reference
    r"|\\."  # any other escape: as it is
    r"|\(\?<(?=[A-Za-z])"  # named group (not a look-behind)
    r"|\(\?[idmsuxU]*(?:-[idmsuxU]*)?[:)]",  # flags: Java's may stand anywhere, has d and U
    re.S,
)


def _python_spelling(token: re.Match[str]) -> str:
    t = token.group()
    if t.startswith("(?<"):
        return "(?P<"
    if t.startswith("(?"):
        return "(?:" if t.endswith(":") else ""
    if t.startswith("\\k<"):
        return f"(?P={t[3:-1]})"
    if t == "\\z":
        return "\\Z"
    if len(t) == 2 and t[1] not in "hHRXGe":
        return t  # an escape both engines know (or Python's own check will name it)
    return "x"  # a Java-only construct matching some text


_WARNINGS = threading.Lock()

#: Python's message for a look-behind of varying width, which Java takes when its width is
#: bounded (``(?<=a|bc)``)
_VARIABLE_LOOK_BEHIND = "look-behind requires fixed-width pattern"
_OPEN_BOUND = re.compile(r"\{\d*,\}")  # {n,}: no upper bound


@contextmanager
def warnings_caught() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings raised in the block, recorded instead of shown. The filters are the
    process's: the block holds a lock, so that two threads compiling patterns at once do not
    leave one's filters in place for the other (another thread's warning meanwhile is
    recorded here, never turned into an error)."""
    with _WARNINGS, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def python_regex_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a regular expression (Python's ``re``, Java-only constructs
    allowed: see the module docstring), or None."""
    neutral = _JAVA_TOKENS.sub(_python_spelling, pattern)
    try:
        with warnings_caught():  # FutureWarning for Java's [a-z&&[^b]] and kin: ignored
            re.compile(neutral)
    except re.error as exc:
        if exc.msg == _VARIABLE_LOOK_BEHIND and not any(
            _unbounded(body) for body in _look_behinds(pattern)
        ):
            return None  # bounded: Java takes it
        # a position in the rewritten text would point at the wrong place of the user's
        return exc.msg if neutral != pattern else str(exc)
    return None


def _skip(pattern: str, i: int) -> int | None:
    """The index after the escape or character class at ``i``, or None when none starts
    there (their ``*``, ``+``, ``(`` and ``)`` are no syntax)."""
    if pattern[i] == "\\":
        return i + 2
    if pattern[i] != "[":
        return None
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    j += 1  # a "]" first in a class is a character
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _look_behinds(pattern: str) -> list[str]:
    """The bodies of the pattern's look-behind groups, ``(?<=...)`` and ``(?<!...)``."""
    bodies, i = [], 0
    while i < len(pattern):
        if (after := _skip(pattern, i)) is not None:
            i = after
        elif pattern.startswith(("(?<=", "(?<!"), i):
            depth, j = 1, i + 4
            while j < len(pattern) and depth:
                if (after := _skip(pattern, j)) is not None:
                    j = after
                    continue
                depth += {"(": 1, ")": -1}.get(pattern[j], 0)
                j += 1
            bodies.append(pattern[i + 4 : j - 1])
            i += 4  # a look-behind inside this one is scanned too
        else:
            i += 1
    return bodies


def _unbounded(body: str) -> bool:
    """Whether ``body`` repeats something without an upper bound (``*``, ``+``, ``{n,}``)."""
    i = 0
    while i < len(body):
        if (after := _skip(body, i)) is not None:
            i = after
        elif body[i] in "*+" or _OPEN_BOUND.match(body, i):
            return True
        else:
            i += 1
    return False


def java_regex_error(jvm: Any, pattern: str) -> str | None:
    """Why Java's ``java.util.regex.Pattern`` (Spark's engine) rejects ``pattern``, or None.

    Args:
        jvm: py4j's JVM view (``spark.sparkContext._jvm``).
    """
    try:
        jvm.java.util.regex.Pattern.compile(pattern)
    except Exception as exc:  # py4j's Py4JJavaError wrapping a PatternSyntaxException
        java = getattr(exc, "java_exception", None)
        message = java.getMessage() if java is not None else str(exc)
        return " ".join(str(message).split())
    return None
