"""Expectation rules: what the configuration declares, checked against Great Expectations at
start-up.

A rule is one table of ``[[quality.expectations]]`` in the pipeline configuration::

    {"message_type": "shop.v1.Order", "expectation": "expect_column_values_to_not_be_null",
     "kwargs": {"column": "order_id"}, "policy": "quarantine"}

``parse_rules`` checks every rule before the first batch runs: the shape of the table, the
policy (``warn`` | ``quarantine`` | ``fail``), that Great Expectations 1.x knows the expectation
and accepts its arguments (GE's own pydantic model validates them), that a ``quarantine`` rule
has a row-level meaning (a column-map, column-pair-map or multicolumn-map expectation), and
that no rule is declared twice, and that its regular expressions (``regex``, ``regex_list``)
compile. Any problem raises :class:`QualityConfigError` naming the rule by index, message type
and expectation.

Regular expressions are Java's (Spark's engine): checked without a JVM here
(``quality.regex_syntax``), and again with Java's own engine when ``QualityChecker`` starts
(:func:`check_java_regexes`), before the first batch.

Every silver table also gets :func:`default_rules`: its lineage columns are not null (``fail``),
its Kafka coordinates are unique (``fail``: a duplicate means a pipeline bug, not bad data) and
its Kafka timestamp lies between 2000-01-01 and the batch's reference time + 1 day
(``quarantine``). A configured rule with the same expectation and arguments as a default
replaces the default (its policy wins).

Every decision is a function of the batch alone, so a retried batch splits exactly as its first
attempt did (silver's writes rely on it: a retry skips the tables the first attempt committed).
Hence "now" is not the wall clock but the batch's reference time, which the caller passes to
``QualityChecker.validate`` (silver: the latest ``_ingested_at`` of the batch's bronze rows), and
a configured rule may read ``_processed_at`` (the wall clock of the attempt) only to check it is
(not) null.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from great_expectations.exceptions import ExpectationNotFoundError
from great_expectations.expectations.expectation import (
    ColumnMapExpectation,
    ColumnPairMapExpectation,
    Expectation,
    MulticolumnMapExpectation,
)
from great_expectations.expectations.registry import (
    get_expectation_impl,
    list_registered_expectation_implementations,
)

from quality.regex_syntax import java_regex_error, python_regex_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

POLICIES = ("warn", "quarantine", "fail")
RULE_KEYS = frozenset({"message_type", "expectation", "kwargs", "policy"})

LINEAGE_NOT_NULL = (
    "_kafka_topic",
    "_kafka_partition",
    "_kafka_offset",
    "_message_type",
    "_processed_at",
)
KAFKA_KEY = ("_kafka_topic", "_kafka_partition", "_kafka_offset")
TIMESTAMP_COLUMN = "_kafka_timestamp"
TIMESTAMP_MIN = datetime(2000, 1, 1, tzinfo=UTC)
# Suite parameter (GE's ``$PARAMETER``) set on every validation to the batch's reference time
# + TIMESTAMP_MAX_SLACK: a suite built at start-up still has a current bound days later, and a
# retried batch gets the bound of its first attempt.
TIMESTAMP_MAX_PARAMETER = "protolake_max_kafka_timestamp"
TIMESTAMP_MAX_SLACK = timedelta(days=1)
# Set from the wall clock of each attempt (silver's lineage): rules may only check for nulls.
WALL_CLOCK_COLUMNS = frozenset({"_processed_at"})
_NULL_CHECKS = frozenset({"expect_column_values_to_not_be_null", "expect_column_values_to_be_null"})

# Arguments that hold regular expressions (Java's syntax: Spark's ``rlike``).
REGEX_ARGUMENTS = ("regex", "regex_list")
# Expectations whose failures are rows: only these can send rows to quarantine.
_ROW_LEVEL_BASES = (ColumnMapExpectation, ColumnPairMapExpectation, MulticolumnMapExpectation)


class QualityConfigError(ValueError):
    """A quality rule is malformed, unknown to Great Expectations, or cannot apply to the data."""


@dataclass(frozen=True)
class ExpectationRule:
    """One expectation applied to every batch of one message type.

    Attributes:
        message_type: fully-qualified Protobuf message name, e.g. ``shop.v1.Order``.
        expectation: Great Expectations' snake-case name, e.g.
            ``expect_column_values_to_not_be_null``.
        kwargs: the expectation's arguments (GE's field names).
        policy: ``warn`` (count and report), ``quarantine`` (failing rows leave silver) or
            ``fail`` (the whole batch fails, nothing is committed).
        index: position in the configured list; -1 for a default rule.
    """

    message_type: str
    expectation: str
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    policy: str = "warn"
    index: int = -1

    @property
    def is_default(self) -> bool:
        return self.index < 0

    @property
    def expectation_id(self) -> str:
        """``name(key=value, ...)``: unique within a suite; results' ``expectation`` column."""
        return format_expectation_id(self.expectation, self.kwargs)

    @property
    def row_level(self) -> bool:
        return issubclass(expectation_class(self.expectation), _ROW_LEVEL_BASES)

    def describe(self) -> str:
        """How an error message names this rule."""
        where = "default rule" if self.is_default else f"quality.expectations[{self.index}]"
        return f"{where} (message_type={self.message_type!r}, expectation={self.expectation!r})"

    def is_twin(self, other: ExpectationRule) -> bool:
        """Whether this rule and ``other`` are one expectation of a table's suite: the same
        type and message type, and either the same :attr:`expectation_id` (results are keyed
        by it, so two rules it cannot tell apart are one rule even where GE would keep both,
        e.g. ``min_value: "5"`` and ``5``) or the same arguments once GE fills in its defaults,
        which GE's suite holds as one (a rule naming a default value, such as
        ``ignore_row_if="all_values_are_missing"`` on ``expect_compound_columns_to_be_unique``,
        is the rule without it)."""
        if (self.message_type, self.expectation) != (other.message_type, other.expectation):
            return False
        if self.expectation_id == other.expectation_id:
            return True
        return _suite_fields(self.to_expectation()) == _suite_fields(other.to_expectation())

    def to_expectation(self) -> Expectation:
        """Build the Great Expectations object (validates the arguments)."""
        cls = expectation_class(self.expectation)
        try:
            return cls(**dict(self.kwargs))
        except Exception as exc:  # pydantic's ValidationError, or a model validator's ValueError
            raise QualityConfigError(
                f"{self.describe()}: arguments {dict(self.kwargs)!r} rejected by Great "
                f"Expectations: {_one_line(exc)}"
            ) from exc

    def regexes(self) -> tuple[str, ...]:
        """The regular expressions among the arguments (``regex``, ``regex_list``)."""
        found: list[str] = []
        for key in REGEX_ARGUMENTS:
            value = self.kwargs.get(key)
            values = value if isinstance(value, list) else [value]
            found.extend(v for v in values if isinstance(v, str))
        return tuple(found)

    def columns(self) -> tuple[str, ...]:
        """Columns the rule reads (for checking them against a batch's schema)."""
        cols: list[str] = []
        for key in ("column", "column_A", "column_B"):
            value = self.kwargs.get(key)
            if isinstance(value, str):
                cols.append(value)
        for value in self.kwargs.get("column_list") or ():
            if isinstance(value, str):
                cols.append(value)
        return tuple(cols)


@cache
def expectation_class(name: str) -> type[Expectation]:
    """Great Expectations' class for a snake-case expectation name.

    Raises:
        QualityConfigError: GE has no such expectation (with the closest names).
    """
    try:
        return get_expectation_impl(name)
    except ExpectationNotFoundError:
        known = list_registered_expectation_implementations()
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise QualityConfigError(f"unknown Great Expectations expectation {name!r}{hint}") from None


def parse_rules(raw: Sequence[Mapping[str, Any]] | None) -> list[ExpectationRule]:
    """Validate the configured rule tables and return them as :class:`ExpectationRule`.

    Raises:
        QualityConfigError: naming the first bad rule (index, message type, expectation).
    """
    if raw is None:
        return []
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise QualityConfigError("quality.expectations: must be a list of tables")
    rules: list[ExpectationRule] = []
    for index, table in enumerate(raw):
        rule = _parse_rule(index, table)
        twin = next((r for r in rules if r.is_twin(rule)), None)
        if twin is not None:
            raise QualityConfigError(
                f"{rule.describe()}: same expectation and arguments as "
                f"quality.expectations[{twin.index}]"
            )
        rules.append(rule)
    return rules


# The fields GE's suite compares to tell two expectations apart (ExpectationSuite.add_expectation
# keeps one of two that agree on all the others).
_NOT_COMPARED = {"id", "rendered_content", "notes", "meta"}


def _suite_fields(expectation: Expectation) -> dict[str, Any]:
    return expectation.dict(exclude=_NOT_COMPARED)


def _check_parameters(value: Any, where: str) -> None:
    """Refuse a ``{"$PARAMETER": name}`` argument (at any depth) with another name than the
    one every validation sets (:data:`TIMESTAMP_MAX_PARAMETER`): each batch would fail."""
    if isinstance(value, Mapping):
        name = value.get("$PARAMETER")
        if name is not None and name != TIMESTAMP_MAX_PARAMETER:
            raise QualityConfigError(
                f"{where}: unknown suite parameter {{'$PARAMETER': {name!r}}}: the only "
                f"parameter set on each validation is {TIMESTAMP_MAX_PARAMETER!r} (the batch's "
                "newest Kafka timestamp plus the allowed skew); write the value itself"
            )
        for item in value.values():
            _check_parameters(item, where)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_parameters(item, where)


def _parse_rule(index: int, table: Any) -> ExpectationRule:
    where = f"quality.expectations[{index}]"
    if not isinstance(table, Mapping):
        raise QualityConfigError(f"{where}: must be a table, got {type(table).__name__}")
    message_type = table.get("message_type")
    expectation = table.get("expectation")
    where = f"{where} (message_type={message_type!r}, expectation={expectation!r})"
    unknown = sorted(set(table) - RULE_KEYS)
    if unknown:
        raise QualityConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(RULE_KEYS))}"
        )
    if not isinstance(message_type, str) or not message_type.strip():
        raise QualityConfigError(f"{where}: message_type must be a non-empty string")
    if not isinstance(expectation, str) or not expectation.strip():
        raise QualityConfigError(f"{where}: expectation must be a non-empty string")
    kwargs = table.get("kwargs", {})
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise QualityConfigError(f"{where}: kwargs must be a table of arguments")
    policy = table.get("policy", "warn")
    if policy not in POLICIES:
        raise QualityConfigError(
            f"{where}: policy must be one of {', '.join(POLICIES)}, got {policy!r}"
        )
    try:
        expectation_class(expectation)
    except QualityConfigError as exc:
        raise QualityConfigError(f"{where}: {exc}") from None
    rule = ExpectationRule(message_type, expectation, _plain(dict(kwargs)), policy, index)
    rule.to_expectation()  # raises QualityConfigError on bad arguments
    _check_parameters(rule.kwargs, where)
    _check_bounds(rule, where)
    nested = [c for c in rule.columns() if "." in c]
    if nested:
        raise QualityConfigError(
            f"{where}: {', '.join(nested)}: a rule checks a table's top-level columns; nested "
            "fields are not checked (a Protobuf field name has no dot)"
        )
    for pattern in rule.regexes():
        error = python_regex_error(pattern)
        if error is not None:
            raise QualityConfigError(f"{where}: invalid regular expression {pattern!r}: {error}")
    clocked = sorted(WALL_CLOCK_COLUMNS.intersection(rule.columns()))
    if clocked and expectation not in _NULL_CHECKS:
        raise QualityConfigError(
            f"{where}: {', '.join(clocked)} is the wall clock of the attempt that wrote the "
            "row: a retried batch would be judged differently (only null checks may read it; "
            "check _kafka_timestamp instead)"
        )
    if policy == "quarantine" and not rule.row_level:
        raise QualityConfigError(
            f"{where}: policy 'quarantine' needs a row-level expectation (column map, column "
            f"pair map or multicolumn map); {expectation} judges the batch as a whole: use "
            f"'warn' or 'fail'"
        )
    return rule


def judged_kwargs(rule: ExpectationRule) -> dict[str, Any]:
    """``rule``'s arguments with its numbers as Great Expectations judges them: its model
    converts some (``be_between``'s bounds to floats, so 2**53 + 1 is 2**53; ``value_lengths``'
    bounds to integers, so 1.5 is 1), and the compiled checks must compare what GE compares.
    The rule keeps them as written (its :attr:`~ExpectationRule.expectation_id` names them)."""
    return dict(_judged(rule))


@cache
def _judged(rule: ExpectationRule) -> Mapping[str, Any]:
    given = rule.to_expectation().configuration.kwargs
    kwargs = dict(rule.kwargs)
    for key, value in rule.kwargs.items():
        if _is_number(value) and _is_number(given.get(key)):
            kwargs[key] = given[key]
    return kwargs


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_bounds(rule: ExpectationRule, where: str) -> None:
    """Refuse a ``min_value`` above the ``max_value``, as Great Expectations takes them
    (:func:`judged_kwargs`): no value is within, so every row would be unexpected (GE's own
    engines refuse it only when they validate)."""
    judged = judged_kwargs(rule)
    lo, hi = judged.get("min_value"), judged.get("max_value")
    if lo is None or hi is None or isinstance(lo, Mapping) or isinstance(hi, Mapping):
        return  # an open side, or a suite parameter: known only when validating
    try:
        above = lo > hi
    except TypeError:
        return  # bounds Python does not order (GE refuses what it cannot compare)
    if above:
        raise QualityConfigError(
            f"{where}: min_value {_show(lo)} is greater than max_value {_show(hi)}: no value "
            "is within"
        )


def default_rules(message_type: str) -> list[ExpectationRule]:
    """The rules every silver table gets (see the module docstring)."""
    rules = [
        ExpectationRule(message_type, "expect_column_values_to_not_be_null", {"column": c}, "fail")
        for c in LINEAGE_NOT_NULL
    ]
    rules.append(
        ExpectationRule(
            message_type,
            "expect_compound_columns_to_be_unique",
            {"column_list": list(KAFKA_KEY)},
            "fail",
        )
    )
    rules.append(
        ExpectationRule(
            message_type,
            "expect_column_values_to_be_between",
            {
                "column": TIMESTAMP_COLUMN,
                "min_value": TIMESTAMP_MIN,
                "max_value": {"$PARAMETER": TIMESTAMP_MAX_PARAMETER},
            },
            "quarantine",
        )
    )
    return rules


def suite_rules(message_type: str, configured: Sequence[ExpectationRule]) -> list[ExpectationRule]:
    """Defaults then configured rules for one message type; a configured twin
    (:meth:`ExpectationRule.is_twin`) replaces a default."""
    mine = [r for r in configured if r.message_type == message_type]
    defaults = [d for d in default_rules(message_type) if not any(d.is_twin(r) for r in mine)]
    return defaults + mine


def format_expectation_id(expectation: str, kwargs: Mapping[str, Any]) -> str:
    """``name(key=value, ...)`` with sorted keys; GE's own ``batch_id`` argument is left out."""
    args = ", ".join(f"{k}={_show(v)}" for k, v in sorted(kwargs.items()) if k != "batch_id")
    return f"{expectation}({args})"


def _plain(value: Any) -> Any:
    """TOML tables and arrays as plain dicts and lists (GE serialises its kwargs as JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _show(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping) and set(value) == {"$PARAMETER"}:
        return f"${value['$PARAMETER']}"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def missing_columns(rules: list[ExpectationRule], schema: StructType) -> dict[str, list[str]]:
    """The columns each rule reads that the batch lacks, by expectation id (rules with some)."""
    present = set(schema.fieldNames())
    out: dict[str, list[str]] = {}
    for rule in rules:
        missing = [c for c in rule.columns() if c not in present]
        if missing:
            out[rule.expectation_id] = missing
    return out


def check_java_regexes(spark: SparkSession, rules: list[ExpectationRule]) -> None:
    """Compile every configured regular expression with Java's engine, the one Spark uses."""
    jvm = getattr(spark.sparkContext, "_jvm", None) if hasattr(spark, "sparkContext") else None
    if jvm is None:  # Spark Connect: no JVM in this process; the Python pre-check stands
        return
    for rule in rules:
        for pattern in rule.regexes():
            error = java_regex_error(jvm, pattern)
            if error is not None:
                raise QualityConfigError(
                    f"{rule.describe()}: invalid regular expression {pattern!r} for Java's "
                    f"java.util.regex (Spark's engine): {error}"
                )
