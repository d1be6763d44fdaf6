"""The ``protolake`` command: one subcommand per job, each in its own module.

    protolake <command> --config FILE [--json] [-v]
    protolake bronze|silver --config FILE [--trigger available-now|processing-time] [--json] [-v]

Contract for a subcommand module (listed in :data:`COMMANDS`):

- it exposes ``add_parser(subparsers) -> None`` that calls ``subparsers.add_parser(<name>,
  ...)``, adds the command's own options and sets ``func`` (``parser.set_defaults(func=f)``);
- ``func(args: argparse.Namespace) -> int | None`` runs the command and returns the exit code
  (None means 0); it loads the configuration itself (``load_config(args.config)``);
- this module adds the common options to the command's parser after ``add_parser`` returns
  (``args.config``, ``args.trigger`` (None unless given), ``args.json``, ``args.verbose``), so
  a module need not (and if it does, its own definition is kept).

Modules are imported only when their command runs (Spark and friends load slowly, and a
command whose module is missing must not break the others); the listing in ``--help`` comes
from the static table. A missing module is an error naming it, never silently skipped.
``ConfigError`` and ``quality.rules.QualityConfigError`` (a rule silver or replay found unusable) are
reported as one line (exit 2); so is a lakehouse object store that cannot be used
(``pipelines.settings.preflight.StoreError``) and a writer lease another driver holds
(``lakehouse.lease.WriterLeaseError``), exit 1. Any other failure is one line too, its cause
(``pipelines.failure_line``: the Python error inside a streaming query's JVM stack, the root of a
JVM chain), exit 1; with ``-v`` it propagates with its whole trace.
``pipelines/jobs/run.py`` (spark-submit, the DAGs) calls :func:`main` too, the same code path,
with ``full_traces``: a scheduler's task log keeps every failure's whole trace.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from lakehouse.lease import WriterLeaseError
from lakehouse.streaming import TRIGGERS
from pipelines.failure_line import failure_line
from pipelines.log_names import KAFKA_CLIENT_LOGGER, METRICS_LOGGER, PROGRESS_LOGGER
from pipelines.settings import ConfigError
from pipelines.settings.preflight import StoreError

#: the commands that run streams, whose trigger ``--trigger`` overrides
STREAM_COMMANDS = frozenset({"bronze", "silver"})

# name -> (module, one-line help). Keep in step with docs/contracts.md ("Command line").
COMMANDS: dict[str, tuple[str, str]] = {
    "bronze": ("pipelines.bronze", "land Kafka records in bronze Delta tables, exactly once"),
    "silver": (
        "pipelines.silver.cli",
        "decode bronze into silver tables per message type + quarantine",
    ),
    "demo": ("pipelines.demo.main", "produce a demo stream and run every stage on it"),
    "replay": ("pipelines.ops.replay", "re-decode quarantined records"),
    "status": ("pipelines.ops.status", "Kafka end offsets against the lakehouse, per partition"),
    "audit": ("pipelines.ops.audit", "check bronze = silver + quarantine, record by record"),
    "maintain": ("pipelines.ops.maintain", "optimize and vacuum the Delta tables"),
    "sql": ("pipelines.ops.sql", "query the lakehouse's tables by name"),
}


class CommandUnavailableError(RuntimeError):
    """A listed command whose module cannot be imported in this installation."""


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (None: listing only).

    Raises:
        CommandUnavailableError: the module of ``command`` does not exist or does not register it.
    """
    parser = argparse.ArgumentParser(
        prog="protolake",
        description="Land Confluent-framed Protobuf from Kafka in a Delta Lake lakehouse.",
        epilog="Run `protolake <command> --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"protolake {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        if name != command:
            subparsers.add_parser(name, help=help_text, add_help=False)
            continue
        module = _import_command(name, module_name)
        add_parser = getattr(module, "add_parser", None)
        if not callable(add_parser):
            raise CommandUnavailableError(f"{module_name} has no add_parser(subparsers)")
        add_parser(subparsers)
        sub = subparsers.choices.get(name)
        if sub is None:
            raise CommandUnavailableError(f"{module_name}.add_parser did not register {name!r}")
        add_common_options(sub, trigger=name in STREAM_COMMANDS)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("protolake")
    except PackageNotFoundError:  # run from a checkout without an install
        return "(not installed)"


def add_common_options(parser: argparse.ArgumentParser, trigger: bool = True) -> None:
    """``--config``, ``--trigger`` (when ``trigger``: a command that runs streams), ``--json``,
    ``-v`` (each unless the parser has it)."""
    have = set(parser._option_string_actions)  # argparse keeps no public view of these
    if "--config" not in have:
        parser.add_argument("--config", required=True, metavar="FILE", help="TOML file")
    if trigger and "--trigger" not in have:
        parser.add_argument(
            "--trigger", choices=TRIGGERS, default=None, help="overrides the file's trigger"
        )
    if "--json" not in have:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
    if "-v" not in have and "--verbose" not in have:
        parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def _import_command(name: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only the command's own module missing means "not available"; a missing dependency
        # inside it is a broken install, reported as such by the traceback.
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise CommandUnavailableError(
                f"{name}: not available in this installation ({module_name} is missing)"
            ) from exc
        raise


def _chosen_command(argv: Sequence[str]) -> str | None:
    # The first argument that is not an option names the command (no global options take a
    # value, so no value can be mistaken for it).
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def configure_logging(verbose: bool, as_json: bool = False) -> None:
    """Log to stderr, for a person by default.

    - default: a short line per stage and micro-batch (``pipelines.progress``, as is), and
      warnings and errors of everything;
    - ``--json``: protolake's INFO lines instead, among them one JSON line per micro-batch and
      query event (``pipelines.metrics``) for machines to read;
    - ``-v``: protolake at DEBUG (the configuration it runs with included), short lines too,
      and the Kafka clients' own lines (quiet otherwise: ``log_names.KAFKA_CLIENT_LOGGER``).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    level = logging.DEBUG if verbose else logging.INFO if as_json else logging.WARNING
    for name in ("pipelines", "codec", "lakehouse", "quality"):
        logging.getLogger(name).setLevel(level)
    # librdkafka retries a broker that does not answer with a line per attempt; the command
    # says in one line what failed (-v: every line)
    logging.getLogger(KAFKA_CLIENT_LOGGER).setLevel(logging.DEBUG if verbose else logging.CRITICAL)
    progress = logging.getLogger(PROGRESS_LOGGER)
    progress.propagate = False
    progress.setLevel(logging.WARNING if as_json and not verbose else logging.INFO)
    for old in [h for h in progress.handlers if getattr(h, "_protolake_progress", False)]:
        progress.removeHandler(old)  # configured again: one handler, on today's stderr
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._protolake_progress = True  # type: ignore[attr-defined]
    progress.addHandler(handler)


class _LineFormatter(logging.Formatter):
    """The log's format, except for the metrics' JSON lines (``pipelines.metrics``), which
    stay bare JSON: one document a line, for machines to read (``--json``)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == METRICS_LOGGER:
            return record.getMessage()
        return super().format(record)


def main(argv: Sequence[str] | None = None, *, full_traces: bool = False) -> int:
    """Entry point of the ``protolake`` console script; returns the exit code.

    ``full_traces``: an unexpected failure propagates with its trace, as with ``-v``, instead
    of being told in one line (the module docstring)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_chosen_command(args_list))
    except CommandUnavailableError as exc:
        print(f"protolake: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(args_list)
    configure_logging(bool(getattr(args, "verbose", False)), bool(getattr(args, "json", False)))
    func = getattr(args, "func", None)
    if func is None:
        parser.error(f"{args.command}: the command registered no func")
    try:
        code = func(args)
    except (StoreError, WriterLeaseError) as exc:
        print(f"protolake {args.command}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if _is_config_error(exc):
            print(f"protolake {args.command}: configuration error: {exc}", file=sys.stderr)
            return 2
        if full_traces or getattr(args, "verbose", False):
            raise
        print(f"protolake {args.command}: failed: {failure_line(exc)}", file=sys.stderr)
        print(f"protolake {args.command}: -v shows the whole trace", file=sys.stderr)
        return 1
    return 0 if code is None else int(code)


def _is_config_error(exc: BaseException) -> bool:
    """A ``ConfigError``, or the quality package's ``QualityConfigError``.

    quality must not import pipelines (an import-linter contract), so its error is no
    ConfigError; it is recognised without importing quality (nor Great Expectations): if it
    was raised, its module is loaded.
    """
    if isinstance(exc, ConfigError):
        return True
    rules = sys.modules.get("quality.rules")
    quality_error = getattr(rules, "QualityConfigError", None)
    return isinstance(quality_error, type) and isinstance(exc, quality_error)


if __name__ == "__main__":
    sys.exit(main())
