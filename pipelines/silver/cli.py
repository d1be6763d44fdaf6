"""``protolake silver`` and ``python -m pipelines.silver``: run the silver job, print a summary."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.settings import load_config

from .job import run, summarize


def add_parser(subparsers: Any) -> None:
    """Register ``protolake silver`` (pipelines/cli.py adds --config, --trigger, --json, -v)."""
    parser = subparsers.add_parser(
        "silver",
        help="decode bronze into silver tables per message type + quarantine",
        description="Decode bronze records into one Delta table per message type; "
        "undecodable records go to the quarantine table.",
    )
    parser.add_argument(
        "--bronze-table",
        action="append",
        default=None,
        metavar="NAME",
        help="bronze table to read (repeatable; default: every table under <lakehouse>/bronze)",
    )
    parser.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake silver``: load the configuration, run, print a summary."""
    cfg = load_config(args.config)
    t0 = time.monotonic()
    trigger = args.trigger or cfg.silver.trigger
    result = run(cfg, trigger=trigger, bronze_table_names=args.bronze_table, handle_signals=True)
    summary = summarize(result, cfg) | {"seconds": round(time.monotonic() - t0, 3)}
    _print_summary(summary, as_json=bool(getattr(args, "json", False)))
    return 0


def _print_summary(
    summary: dict[str, Any], as_json: bool, out: Callable[[str], Any] = print
) -> None:
    if as_json:
        out(json.dumps(summary, sort_keys=True))
        return
    if not summary["bronze_tables"]:
        missing = summary.get("missing") or []
        what = f"bronze table {', '.join(missing)}" if missing else "bronze table"
        out(f"silver: nothing to take: no {what} under {summary['bronze_root']} yet")
        return
    out(
        f"silver: {summary['records']} records in {summary['batches']} batches "
        f"({summary['seconds']} s) -> {len(summary['tables'])} tables under {summary['silver_root']}; "
        f"quarantined {summary['quarantined']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.silver --config FILE``: the same as ``protolake silver``."""
    from pipelines.cli import main as cli_main

    return cli_main(["silver", *(sys.argv[1:] if argv is None else argv)])
