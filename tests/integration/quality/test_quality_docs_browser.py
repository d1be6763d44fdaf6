"""Great Expectations Data Docs, opened in headless Chromium (Debian's ``chromium``).

The test reads the DOM Chromium renders: the index must show every suite and the latest
result of each; the linked result page must show the failed expectation and its counts.
"""

from __future__ import annotations

import html.parser
import os
import subprocess
from pathlib import Path

import pytest

from quality.checker import QualityChecker
from quality.rules import parse_rules
from tests.support.quality_testkit import ORDER, TABLE, make_batch, order_row

pytestmark = pytest.mark.integration

CHROMIUM = os.environ.get("PROTOLAKE_CHROMIUM", "/usr/bin/chromium")


class _Page(html.parser.HTMLParser):
    """Visible text and link targets of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "a":
            self.links.extend(v for k, v in attrs if k == "href" and v)

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.text.append(" ".join(data.split()))


def render(page: Path, tmp_path: Path) -> _Page:
    """The DOM of ``page`` after Chromium loaded it, parsed."""
    profile = tmp_path / f"chromium-profile-{page.stem}"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    parsed = _Page()
    parsed.feed(proc.stdout)
    return parsed


def test_data_docs_show_every_suite_and_its_latest_result(spark, tmp_path):
    rules = parse_rules(
        [
            {
                "message_type": ORDER,
                "expectation": "expect_column_values_to_not_be_null",
                "kwargs": {"column": "order_id"},
                "policy": "quarantine",
            },
            {
                "message_type": "shop.v1.Refund",
                "expectation": "expect_column_values_to_be_unique",
                "kwargs": {"column": "refund_id"},
                "policy": "warn",
            },
        ]
    )
    checker = QualityChecker(spark, str(tmp_path / "lakehouse"), rules)
    checker.validate(
        make_batch(spark, [order_row(i) for i in range(3)]),
        message_type=ORDER,
        table=TABLE,
        batch_id=7,
    )
    checker.build_data_docs()
    rows = [order_row(i, order_id=None if i == 1 else f"o-{i}") for i in range(4)]
    checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=8)
    index = checker.build_data_docs()
    assert index == tmp_path / "lakehouse" / "quality" / "docs" / "index.html"

    page = render(index, tmp_path)
    text = " | ".join(page.text)
    assert "shop.v1.Order" in text and "shop.v1.Refund" in text, text
    assert "shop_v1__order-batch-8" in text, text
    assert "batch-7" not in text, text  # only the latest result per suite
    assert "FAILED" in text
    assert "expect_column_values_to_not_be_null(column=order_id)" in text
    assert "7 of 8" in text  # 7 defaults + 1 rule; the order_id rule failed
    assert "not validated yet" in text  # the Refund suite exists, no batch yet

    [result_link] = [link for link in page.links if link.startswith("validations/")]
    result_page = render(index.parent / result_link, tmp_path)
    result_text = " | ".join(result_page.text)
    assert "shop.v1.Order" in result_text
    assert "order_id" in result_text and "values must never be null" in result_text
    assert "1 unexpected values found" in result_text, result_text

    [suite_link] = [link for link in page.links if link.endswith("Refund.html")]
    suite_text = " | ".join(render(index.parent / suite_link, tmp_path).text)
    assert "refund_id" in suite_text and "values must be unique" in suite_text, suite_text
