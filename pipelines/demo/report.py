"""What the demo prints: the report as data, the checks it passes or fails, and its text.

:class:`DemoReport` holds everything the demo found (:mod:`pipelines.demo.collect` fills it
from the lakehouse); :func:`evaluate_checks` sets ``report.checks`` (the demo's exit code is 0
when every check that could run passed); :func:`format_report` renders it for a person, and
:meth:`DemoReport.to_dict` for ``--json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.demo.stream import DemoStreamSummary

#: How the report names the demo's configuration file (relative to the repository).
CONFIG_HINT = "pipelines/demo/demo.toml"


@dataclass
class DemoReport:
    """Everything the demo prints, as data (``--json`` prints :meth:`to_dict`)."""

    lakehouse: str
    topics: list[str]
    produced: DemoStreamSummary | None = None
    records_on_topics: int = 0
    expected: dict[str, Any] | None = None  # merged stream summaries, see _expected
    stages: dict[str, str] = field(default_factory=dict)
    tables: list[dict[str, Any]] = field(default_factory=list)
    bronze_rows: int | None = None
    silver_by_type: dict[str, int] | None = None
    quarantine_by_reason: dict[str, int] | None = None
    invariant: dict[str, Any] | None = None
    quality: list[dict[str, Any]] | None = None
    dq_failed_rows: int | None = None  # DQ_FAILED rows in quarantine, every topic
    data_docs: str | None = None
    sql: dict[str, Any] | None = None
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "produced"}
        out["produced"] = self.produced.to_dict() if self.produced else None
        out["ok"] = self.ok
        return out


def evaluate_checks(report: DemoReport) -> None:
    """Set ``report.checks``: one entry per check the collected data allows."""
    checks = report.checks
    if report.bronze_rows is not None:
        checks["bronze holds every record on the topics"] = (
            report.bronze_rows == report.records_on_topics
        )
    if report.invariant is not None:
        checks["bronze = silver + quarantine"] = bool(report.invariant["holds"])
    exp = report.expected
    if (
        exp is not None
        and report.silver_by_type is not None
        and exp["records"] == report.records_on_topics
    ):
        checks["silver rows per message type as the stream predicts"] = (
            report.silver_by_type == exp["silver_by_type"]
        )
        checks["quarantine by reason as the stream predicts"] = (
            report.quarantine_by_reason == exp["quarantine_by_reason"]
        )
    if report.quality is not None:
        silver_tables = {t["table"] for t in report.tables if t["layer"] == "silver"}
        if silver_tables:
            checked = {q.get("table") for q in report.quality}
            checks["every silver table has quality results"] = silver_tables <= checked
    if report.quality and report.dq_failed_rows is not None:
        checks["quality results count every DQ_FAILED row"] = (
            sum(int(q.get("quarantined") or 0) for q in report.quality) == report.dq_failed_rows
        )
    if report.sql is not None:
        checks["the example query runs"] = "rows" in report.sql


def format_report(report: DemoReport) -> str:
    """The report as text a person reads."""
    lines = ["", "=" * 78, f"protolake demo: lakehouse {report.lakehouse}", "=" * 78]
    for section in (
        _stream_lines,
        _table_lines,
        _count_lines,
        _invariant_lines,
        _quality_lines,
        _sql_lines,
        _check_lines,
    ):
        lines += section(report)
    return "\n".join(lines)


def _stream_lines(report: DemoReport) -> list[str]:
    p = report.produced
    if p is None:
        lines = [
            f"Stream: the topics already hold {report.records_on_topics} records; nothing "
            "produced (--append adds more)"
        ]
        exp = report.expected
        if exp is None or exp["records"] != report.records_on_topics:
            lines.append(
                "  no demo stream recorded in this lakehouse accounts for them (a produce "
                "interrupted?): the counts per type and reason are not checked; `make clean` "
                "(or another --topic-prefix) starts afresh"
            )
    else:
        lines = [
            f"Stream: produced {p.records} records ({p.poison} poison) to "
            f"{', '.join(report.topics)}",
            "  per message type: " + ", ".join(f"{k} {v}" for k, v in p.per_message_type.items()),
            "  orders and order lines by schema version: "
            + ", ".join(f"{k} {v}" for k, v in p.order_schema_versions.items())
            + f"; schema id in a header: {p.header_framed}",
            "  poison by expected reason: "
            + ", ".join(f"{k} {v}" for k, v in p.poison_by_reason.items()),
        ]
    return lines + [f"{stage.capitalize()}: {what}" for stage, what in report.stages.items()]


def _table_lines(report: DemoReport) -> list[str]:
    lines = ["", "Delta tables"]
    if not report.tables:
        lines.append("  (none yet)")
    for t in report.tables:
        lines.append(f"  {t['layer'] + '/' + t['table']:<62} {t['rows']:>8} rows")
    return lines


def _count_lines(report: DemoReport) -> list[str]:
    exp = report.expected or {}
    lines: list[str] = []
    for found, key, title in (
        (report.quarantine_by_reason, "quarantine_by_reason", "Quarantine by reason"),
        (report.silver_by_type, "silver_by_type", "Silver rows by message type"),
    ):
        if found is None:
            continue
        lines += ["", f"{title + ' (demo topics)':<43} found   expected"]
        expected = exp.get(key, {})
        for name in sorted(set(found) | set(expected)):
            want = expected.get(name, "-")
            lines.append(f"  {name:<40} {found.get(name, 0):>7} {want!s:>10}")
    return lines


def _invariant_lines(report: DemoReport) -> list[str]:
    inv = report.invariant
    if inv is None:
        return []
    state = "HOLDS" if inv["holds"] else "VIOLATED"
    lines = [
        "",
        f"Invariant bronze = silver + quarantine: {inv['bronze']} = {inv['silver']} + "
        f"{inv['quarantine']}  {state}",
    ]
    if not inv["holds"]:
        lines.append(
            f"  missing {inv['missing']}, in both {inv['in_both']}, twice {inv['duplicated']}, "
            f"not in bronze {inv['orphans']}, twice in bronze {inv['bronze_duplicates']}"
        )
        for kind, offenders in inv["offenders"].items():
            lines += [
                f"    {kind}: {o['topic']}[{o['partition']}]@{o['offset']} in {o['found_in']}"
                for o in offenders
            ]
    return lines


def _quality_lines(report: DemoReport) -> list[str]:
    if report.quality is None:
        return []
    lines = ["", "Quality (per silver table: the default suite, plus configured expectations)"]
    if not report.quality:
        lines.append("  (no validation results yet)")
    for q in report.quality:
        lines.append(
            f"  {q.get('message_type') or q.get('table')}: checked {q.get('checked', 0)}, "
            f"passed {q.get('passed', 0)}, quarantined {q.get('quarantined', 0)}"
        )
        for expectation, f in sorted((q.get("failed_by_expectation") or {}).items()):
            lines.append(
                f"    {expectation} [{f.get('policy')}]: {f.get('unexpected_rows', 0)} rows "
                f"in {f.get('failed_batches', 0)} batch(es)"
            )
    if report.dq_failed_rows is not None:
        quarantined = sum(int(q.get("quarantined") or 0) for q in report.quality)
        lines.append(
            f"  quarantined by quality: {quarantined} (quality results), "
            f"{report.dq_failed_rows} (DQ_FAILED rows in quarantine)"
        )
    if report.data_docs:
        shown = report.data_docs if "://" in report.data_docs else f"file://{report.data_docs}"
        lines.append(f"  Data Docs: {shown}")
    return lines


def _sql_lines(report: DemoReport) -> list[str]:
    sql = report.sql
    if sql is None:
        return []
    lines = [
        "",
        "Try it: an analyst's query (run your own with "
        f'`.venv/bin/protolake sql --config {CONFIG_HINT} "SELECT ..."`; '
        "`--tables` lists what there is)",
        "  " + sql["query"].replace("\n", "\n  ") + ";",
    ]
    if "rows" not in sql:
        return [*lines, f"  (the query failed: {sql['error']})"]
    rows = sql["rows"]
    if rows:
        cols = list(rows[0])
        lines.append("  " + " | ".join(f"{c:>14}" for c in cols))
        lines += ["  " + " | ".join(f"{row[c]!s:>14}" for c in cols) for row in rows]
    return lines


def _check_lines(report: DemoReport) -> list[str]:
    lines = [""] + [f"[{'ok' if ok else 'FAILED'}] {name}" for name, ok in report.checks.items()]
    if not report.checks:
        lines.append("(no check could run: no stage has produced tables yet)")
    return lines
