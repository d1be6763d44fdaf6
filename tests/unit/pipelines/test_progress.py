"""What a person sees of a job: the short lines per batch and stage, bars, and what the
command line's logging shows by default, with --json and with -v (no JVM)."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from pipelines import metrics, progress
from pipelines.cli import configure_logging


def _progress(query: str, batch_id: int, rows: int, ms: int = 900) -> dict[str, Any]:
    return {
        "name": query,
        "batchId": batch_id,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": ms},
        "sources": [],
    }


def test_bars() -> None:
    assert progress.bar(0, 1000, width=10) == "[----------]  0/1000"
    assert progress.bar(250, 1000, width=10) == "[##--------]  250/1000"
    assert progress.bar(1200, 1000, width=10) == "[##########]  1200/1000"


def test_a_bronze_batch_line_names_its_tables_and_fills_the_stage_bar() -> None:
    q = "protolake-bronze-per_topic"
    progress.expect("bronze", 1000)
    metrics.bronze_batch_hook(q)(3, ["b_orders", "a_lines"])
    record = metrics.record_progress(_progress(q, 3, 400))
    assert record["tables"] == ["a_lines", "b_orders"]
    assert progress.batch_line(record) == (
        "bronze  batch 3: 400 records -> 2 tables in 0.9 s  [########------------]  400/1000"
    )
    progress.expect("bronze", None)  # unknown total: no bar
    record = metrics.record_progress(_progress(q, 4, 1, ms=1500))
    assert progress.batch_line(record) == "bronze  batch 4: 1 records in 1.5 s"


def test_a_silver_batch_line_says_rows_and_quarantine() -> None:
    from types import SimpleNamespace

    q = "silver_demo_orders"
    progress.expect("silver", None)
    metrics.silver_batch_hook(q)(
        SimpleNamespace(
            batch_id=2, records=120, silver={"t1": 100, "t2": 18}, quarantined={"X": 2}, steps={}
        )
    )
    line = progress.batch_line(metrics.record_progress(_progress(q, 2, 120, ms=1400)))
    assert line == "silver  demo_orders batch 2: 120 records -> 118 rows, 2 quarantined in 1.4 s"


def test_a_bar_for_a_loop_prints_four_lines_off_a_terminal() -> None:
    out = io.StringIO()
    bar = progress.ProgressBar("stream:", 100, stream=out)
    for done in range(1, 101):
        bar.update(done)
    bar.close()
    lines = out.getvalue().splitlines()
    assert [line.split()[-1] for line in lines] == ["25/100", "50/100", "75/100", "100/100"]


@pytest.fixture
def fresh_logging() -> Any:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield
    root.handlers, root.level = saved
    logging.getLogger("pipelines.progress").handlers = []


@pytest.mark.parametrize(
    ("verbose", "as_json", "shown"),
    [
        (False, False, {"progress"}),
        (False, True, {"metrics json", "info"}),
        (True, False, {"progress", "metrics json", "info", "config"}),
    ],
)
def test_what_each_mode_of_the_command_line_shows(
    fresh_logging: Any, capsys: Any, verbose: bool, as_json: bool, shown: set[str]
) -> None:
    logging.getLogger().handlers = []  # pytest's own capture handler: basicConfig would skip
    configure_logging(verbose, as_json)
    configure_logging(verbose, as_json)  # twice in one process: still one line each
    progress.say("silver  waiting for new tables under /lh/bronze")
    logging.getLogger("pipelines.metrics").info(json.dumps({"event": "batch"}))
    logging.getLogger("pipelines.silver").info("silver: a -> b (checkpoint c)")
    logging.getLogger("pipelines.bronze").debug("bronze: configuration {...}")
    logging.getLogger("pipelines.bronze").warning("bronze: a warning")
    err = capsys.readouterr().err
    found = {
        "progress": "silver  waiting for new tables" in err,
        "metrics json": '{"event": "batch"}' in err,
        "info": "checkpoint c" in err,
        "config": "configuration {...}" in err,
    }
    assert {k for k, v in found.items() if v} == shown
    assert err.count("waiting for new tables") == (1 if "progress" in shown else 0)
    assert "bronze: a warning" in err  # warnings always
    # a progress line is the message alone, no timestamp nor logger name
    if "progress" in shown:
        assert "\nsilver  waiting" in "\n" + err


def test_a_silver_batch_is_said_when_it_ends_and_not_again_from_its_progress(caplog: Any) -> None:
    from types import SimpleNamespace

    q = "silver_said_once"
    progress.expect("silver", None)
    with caplog.at_level("INFO", logger="pipelines.progress"):
        metrics.silver_batch_hook(q)(
            SimpleNamespace(
                batch_id=5, records=3, silver={"t": 3}, quarantined={}, seconds=0.4, steps={}
            )
        )
        listener = metrics.MetricsListener()
        listener.onQueryProgress(
            SimpleNamespace(progress=SimpleNamespace(json=json.dumps(_progress(q, 5, 3))))
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "pipelines.progress"]
    assert lines == ["silver  said_once batch 5: 3 records -> 3 rows in 0.4 s"]
