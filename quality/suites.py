"""The Great Expectations context of the quality checks and one expectation suite per message type.

:func:`local_layout` says where Great Expectations keeps its context and Data Docs
(:mod:`quality.docs`): on the local disk, under ``<lakehouse>/quality`` for a local lakehouse
(or ``file://`` URI), in a local temporary folder otherwise (the results table is still in the
lakehouse). :func:`open_context` opens the file context there (created once, reused for every
batch).

:class:`Suites` builds one expectation suite per message type, a :class:`Suite`: the defaults
of :func:`quality.rules.default_rules` plus the configured rules (:func:`quality.rules.
suite_rules`), and each rule's expectation. Suites are code: rebuilt at every start, the
stored JSON is only what Data Docs render.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.core import ExpectationSuite
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.expectations.expectation import Expectation

from lakehouse.layout import Layout
from quality.rules import ExpectationRule, suite_rules

log = logging.getLogger(__name__)


@dataclass
class Suite:
    """One message type's GE suite, its rules, and each rule's expectation (by id)."""

    suite: ExpectationSuite
    rules: list[ExpectationRule]
    by_id: dict[str, ExpectationRule] = field(default_factory=dict)  # by GE expectation id
    expectation_of: dict[str, Expectation] = field(default_factory=dict)  # by expectation_id
    # the suite without the rules GE does not run on a batch (compiled, or columns missing)
    partial: dict[frozenset[str], ExpectationSuite] = field(default_factory=dict)


class Suites:
    """One suite per message type in a GE context: the configured types' built at once, any
    other type's (its default rules) on first use; each kept for the life of the process.

    Thread-safe: a suite is built under ``lock``, the lock every other user of the context
    holds (GE's context is not thread-safe); a suite already built is returned without it.
    """

    def __init__(
        self, context: Any, rules: list[ExpectationRule], lock: AbstractContextManager[Any]
    ) -> None:
        self._context = context
        self._rules = list(rules)
        self._lock = lock
        self._built: dict[str, Suite] = {}
        for message_type in sorted({r.message_type for r in self._rules}):
            self.get(message_type)

    def names(self) -> list[str]:
        """The message types that have a suite, sorted."""
        return sorted(self._built)

    def get(self, message_type: str) -> Suite:
        """The type's suite, built (and stored in the context) on first use."""
        entry = self._built.get(message_type)
        if entry is not None:
            return entry
        with self._lock:  # a new message type is rare
            entry = self._built.get(message_type)
            if entry is not None:
                return entry
            entry = _build(self._context, message_type, suite_rules(message_type, self._rules))
            self._built[message_type] = entry
            return entry


def _build(context: Any, message_type: str, rules: list[ExpectationRule]) -> Suite:
    """The suite of ``rules`` named ``message_type``, added to (or replaced in) the context."""
    suite = ExpectationSuite(name=message_type)
    for rule in rules:
        suite.add_expectation(rule.to_expectation())
    suite = context.suites.add_or_update(suite)
    entry = Suite(suite=suite, rules=rules)
    for rule, expectation in zip(rules, suite.expectations, strict=True):
        entry.by_id[str(expectation.id)] = rule
        entry.expectation_of[rule.expectation_id] = expectation
    return entry


def open_context(quality_dir: Path) -> Any:
    """GE's file context in ``quality_dir`` (the folder created if missing), progress bars off."""
    quality_dir.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(quality_dir))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.variables.save()
    return context


def local_layout(layout: Layout) -> Layout:
    """Where Great Expectations keeps its context and Data Docs: the lakehouse itself when it
    is a local folder, else a layout rooted in a new temporary folder."""
    if layout.is_local:
        return layout
    local = Layout(tempfile.mkdtemp(prefix="protolake-gx-"))
    log.warning(
        "quality: the lakehouse %s is not on the local disk: Great Expectations' context and "
        "Data Docs are built in %s and the Data Docs published to the lakehouse's quality/docs "
        "(the results table is written to the lakehouse)",
        layout.root,
        local.local_quality_dir(),
    )
    return local
