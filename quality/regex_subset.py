"""The regular expressions a row-level rule may match in Python exactly as Spark does.

Spark's ``rlike`` is Java's ``Pattern.find``; :mod:`quality.arrow_checks` answers a regex rule
in the driver only for a pattern of the subset :func:`python_regex` accepts, where Python's
``re`` (ASCII) reads it alike, and only over strings without the line terminators Java knows
and Python does not (:func:`line_sensitive`, :func:`has_line_terminator`). Any other pattern
is Spark's to evaluate. ``tests/integration/quality/test_quality_arrow_parity.py`` checks
regex rules both ways on drawn strings, and which patterns the subset takes.
"""

from __future__ import annotations

import re
from functools import cache

from quality.regex_syntax import warnings_caught

_LINE_TERMINATORS = re.compile("[\n\r\u0085\u2028\u2029]")

_PLAIN = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 @#%&~!,:;<>='\"/_-`"
)
_ESCAPED = frozenset(".\\-+*?()[]{}|^$/@#%&~!,:;<>='\"`_ ")
_SHORTHANDS = frozenset("sSdDwWtnrf")
_QUANTIFIER = re.compile(r"(?:[*+?]|\{\d+(?:,\d*)?\})\??")
_CLASS = re.compile(  # ranges, shorthands, escaped ASCII punctuation, plain printable ASCII
    r"\[\^?(?:[a-z]-[a-z]|[A-Z]-[A-Z]|[0-9]-[0-9]|\\[sSdDwWtnrf]|\\[!-/:-@\[-`{-~]"
    r"|[ !-%'-,./0-9:-@A-Z_`a-z{-~])+\]"
)


@cache  # the answer once per pattern: re's own cache compiles it again without a warning
def python_regex(pattern: str) -> re.Pattern[str] | None:
    """Python's ``re`` (ASCII) for a Java regex of a subset both engines read alike, or None.

    The subset: plain ASCII letters, digits and punctuation; escaped punctuation; ``\\s \\S \\d
    \\D \\w \\W`` (ASCII classes in both: Java without UNICODE_CHARACTER_CLASS, Python with
    ``re.ASCII``), ``\\t \\n \\r \\f``; classes ``[...]`` / ``[^...]`` of those and of ranges
    a-z, A-Z, 0-9 (no nesting, no ``&&``); ``.``, ``^``, ``$``; groups ``(...)`` and
    ``(?:...)``; ``|``; greedy or lazy ``* + ? {n} {n,} {n,m}`` after an atom. Both are
    backtracking engines, so ``find`` and ``search`` agree on these. ``.`` and ``$`` differ
    only on line terminators (Java's ``\\r``, ``\\u0085``, ``\\u2028``, ``\\u2029`` besides
    ``\\n``): the caller checks the strings hold none (:func:`line_sensitive`).
    """
    i, depth, atom = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier:
            if not atom or pattern[quantifier.end() : quantifier.end() + 1] == "+":
                return None  # nothing to repeat, or Java's possessive form
            i, atom = quantifier.end(), False
            continue
        if ch == "[":
            klass = _CLASS.match(pattern, i)
            if klass is None:
                return None
            i, atom = klass.end(), True
            continue
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if not nxt or not (nxt in _SHORTHANDS or nxt in _ESCAPED):
                return None
            i, atom = i + 2, True
            continue
        if ch == "(":
            opener = "(?:" if pattern.startswith("(?:", i) else "("
            if pattern.startswith("(?", i) and opener == "(":
                return None  # look-arounds, flags, named groups
            i, depth, atom = i + len(opener), depth + 1, False
            continue
        if ch == ")":
            if depth == 0:
                return None
            i, depth, atom = i + 1, depth - 1, True
            continue
        if ch in "|^$":
            i, atom = i + 1, False
            continue
        if ch == "." or ch in _PLAIN:
            i, atom = i + 1, True
            continue
        return None
    if depth:
        return None
    try:
        with warnings_caught() as caught:
            compiled = re.compile(pattern, re.ASCII)
    except re.error:
        return None
    # e.g. FutureWarning: a set Python may read anew
    # (another thread's warnings meanwhile are recorded too: only those of this compile count)
    mine = [w for w in caught if w.filename == __file__ and issubclass(w.category, FutureWarning)]
    return None if mine else compiled


def line_sensitive(pattern: str) -> bool:
    """Whether the pattern has an unescaped ``.`` or ``$`` outside a class (see python_regex)."""
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        elif ch in ".$" and not in_class:
            return True
        i += 1
    return False


def has_line_terminator(value: str) -> bool:
    """Whether ``value`` holds a line terminator of Java's (``\\n``, ``\\r``, ``\\u0085``,
    ``\\u2028``, ``\\u2029``): a line-sensitive pattern may then match otherwise there."""
    return _LINE_TERMINATORS.search(value) is not None
