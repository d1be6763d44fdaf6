"""Great Expectations Data Docs of the quality suites: every suite and the latest result of each.

``DataDocs(context, docs_dir)`` configures one site (``protolake``) in GE's file context, writing
under ``docs_dir``; :meth:`DataDocs.build` stores the latest validation result of each suite in
GE's validation results store (older ones of the suite are removed, so the index lists one result
per suite), has GE render the site and puts a plain-HTML overview table at the top of GE's index
(GE's own index tables need JavaScript from public CDNs). :func:`suite_result` assembles a GE
``ExpectationSuiteValidationResult`` from expectation results, with the statistics and ``meta``
GE's own validator gives them, so results computed outside GE render as GE's do.
:func:`publish_folder` copies a rendered site to a lakehouse on another file system (GE
renders into a local folder only).
"""

from __future__ import annotations

import html
import logging
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import great_expectations as gx
from great_expectations.core.expectation_validation_result import (
    ExpectationSuiteValidationResult,
    ExpectationValidationResult,
)
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)

from lakehouse.hadoop import hadoop_path
from quality.rules import format_expectation_id

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DOCS_SITE = "protolake"
OVERVIEW_ID = "protolake-overview"


def suite_result(
    suite_name: str,
    results: list[ExpectationValidationResult],
    *,
    datasource: str,
    asset: str,
    loaded_at: datetime,
) -> ExpectationSuiteValidationResult:
    """GE's suite result for ``results``, as GE's validator builds it for a Spark DataFrame
    batch."""
    evaluated = len(results)
    successful = sum(1 for r in results if r.success)
    return ExpectationSuiteValidationResult(
        success=successful == evaluated,
        results=results,
        suite_name=suite_name,
        statistics={
            "evaluated_expectations": evaluated,
            "successful_expectations": successful,
            "unsuccessful_expectations": evaluated - successful,
            "success_percent": successful / evaluated * 100 if evaluated else None,
        },
        meta={
            "great_expectations_version": gx.__version__,
            "batch_spec": {"batch_data": "SparkDataFrame"},
            "batch_markers": {"ge_load_time": loaded_at.strftime("%Y%m%dT%H%M%S.%fZ")},
            "active_batch_definition": {
                "datasource_name": datasource,
                "data_connector_name": "fluent",
                "data_asset_name": asset,
                "batch_identifiers": {"dataframe": "<DATAFRAME>"},
            },
        },
        batch_id=f"{datasource}-{asset}",
    )


class DataDocs:
    """One Data Docs site of a GE file context (see the module docstring)."""

    def __init__(self, context: Any, docs_dir: Path) -> None:
        self._context = context
        self.docs_dir = docs_dir
        self._configure_docs_site()

    @property
    def index(self) -> Path:
        return self.docs_dir / "index.html"

    def _configure_docs_site(self) -> None:
        for name in list(self._context.list_data_docs_sites()):
            if name != DOCS_SITE:
                self._context.delete_data_docs_site(name)
        site: Any = {
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "show_how_to_buttons": False,
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(self.docs_dir),
            },
        }
        if DOCS_SITE in self._context.list_data_docs_sites():
            self._context.update_data_docs_site(DOCS_SITE, site)
        else:
            self._context.add_data_docs_site(DOCS_SITE, site)

    def build(
        self, latest: dict[str, tuple[ExpectationSuiteValidationResult, str, int, datetime]]
    ) -> Path:
        """Store ``latest`` (by suite: result, table, batch id, time) and render the site.

        Returns the path of ``index.html``. Not thread-safe: the caller serialises builds.
        """
        store = self._context.validation_results_store
        for message_type, (result, table, batch_id, when) in latest.items():
            suite_id = ExpectationSuiteIdentifier(name=message_type)
            for key in store.list_keys():
                if isinstance(key, ValidationResultIdentifier) and (
                    key.expectation_suite_identifier.name == message_type
                ):
                    store.remove_key(key)
            run_id = RunIdentifier(run_name=f"{table}-batch-{batch_id}", run_time=when)
            # GE's own ValidationDefinition.run stores these two (the renderer reads them).
            meta: dict[str, Any] = {"run_id": run_id, "validation_time": when}
            result.meta.update(meta)  # type: ignore[typeddict-item]
            key = ValidationResultIdentifier(
                expectation_suite_identifier=suite_id, run_id=run_id, batch_identifier=table
            )
            store.store_validation_results(result, key, suite_id)
        # Pages of removed results would linger; the index is rebuilt from the store anyway.
        shutil.rmtree(self.docs_dir / "validations", ignore_errors=True)
        self._context.build_data_docs(site_names=[DOCS_SITE])
        _insert_overview(self.index, self._overview_rows())
        return self.index

    def _overview_rows(self) -> list[dict[str, Any]]:
        """Each stored suite with its latest stored validation (from this run or an earlier one)."""
        store = self._context.validation_results_store
        latest: dict[str, ValidationResultIdentifier] = {}
        for key in store.list_keys():
            if not isinstance(key, ValidationResultIdentifier):
                continue
            name = key.expectation_suite_identifier.name
            if name not in latest or key.run_id.run_time > latest[name].run_id.run_time:
                latest[name] = key
        names = {suite.name for suite in self._context.suites.all()} | set(latest)
        rows: list[dict[str, Any]] = []
        for name in sorted(names):
            row: dict[str, Any] = {"suite": name, "suite_page": _page("expectations", name)}
            found = latest.get(name)
            result = store.get(found) if found is not None else None
            if found is not None and result is not None:
                failed = [
                    format_expectation_id(r.expectation_config.type, r.expectation_config.kwargs)
                    for r in result.results
                    if not r.success and r.expectation_config is not None
                ]
                pages = sorted(
                    (self.docs_dir / "validations" / Path(*name.split("."))).rglob("*.html")
                )
                row.update(
                    run=found.run_id.run_name,
                    time=found.run_id.run_time,
                    success=bool(result.success),
                    evaluated=result.statistics.get("evaluated_expectations"),
                    successful=result.statistics.get("successful_expectations"),
                    failed=failed,
                    result_page=pages[-1].relative_to(self.docs_dir).as_posix() if pages else None,
                )
            rows.append(row)
        return rows


def _page(kind: str, suite_name: str) -> str:
    return f"{kind}/{'/'.join(suite_name.split('.'))}.html"


def _insert_overview(index: Path, rows: list[dict[str, Any]]) -> None:
    """Put a plain-HTML table of suites and latest results at the top of GE's index page.

    GE's own index tables are drawn by JavaScript loaded from public CDNs; this table reads
    without them (offline machines, locked-down browsers) and is what the browser test checks.
    """

    def esc(value: Any) -> str:
        return html.escape(str(value), quote=True)

    lines = [
        f'<section id="{OVERVIEW_ID}" class="container-fluid" style="padding:1em">',
        "<h2>protolake: expectation suites and their latest results</h2>",
        '<table class="table table-sm" border="1"><thead><tr><th>Suite</th><th>Latest run</th>'
        "<th>Validated at</th><th>Status</th><th>Expectations met</th><th>Failed expectations</th>"
        "</tr></thead><tbody>",
    ]
    for row in rows:
        suite = f'<a href="{esc(row["suite_page"])}">{esc(row["suite"])}</a>'
        if "run" not in row:
            lines.append(f"<tr><td>{suite}</td><td colspan=5>not validated yet</td></tr>")
            continue
        run = esc(row["run"])
        if row["result_page"]:
            run = f'<a href="{esc(row["result_page"])}">{run}</a>'
        status = "passed" if row["success"] else "FAILED"
        failed = "<br>".join(esc(f) for f in row["failed"]) or "none"
        lines.append(
            f"<tr><td>{suite}</td><td>{run}</td><td>{esc(row['time'])}</td><td>{status}</td>"
            f"<td>{esc(row['successful'])} of {esc(row['evaluated'])}</td><td>{failed}</td></tr>"
        )
    lines.append("</tbody></table></section>")
    text = index.read_text(encoding="utf-8")
    text = re.sub(rf'<section id="{OVERVIEW_ID}".*?</section>', "", text, flags=re.S)
    body = re.search(r"<body[^>]*>", text)
    at = body.end() if body else 0
    index.write_text(text[:at] + "\n".join(lines) + text[at:], encoding="utf-8")


def publish_folder(spark: SparkSession, local: Path, target: str) -> None:
    """Replace the folder ``target`` (any Hadoop file system URI) by a copy of ``local``."""
    jvm, dest, fs = hadoop_path(spark, target)
    fs.delete(dest, True)
    # delSrc=false, overwrite=true: GE's local copy stays for the next build
    fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(local.as_uri()), dest)
    log.info("quality: Data Docs published to %s", target)
