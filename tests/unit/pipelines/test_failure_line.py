"""A command's unexpected failure is one line naming its cause (``pipelines.failure_line``,
``pipelines.cli.main``); ``-v`` and the spark-submit entry keep the whole trace."""

from __future__ import annotations

import argparse
import sys
import types
from typing import Any

import pytest

from pipelines import cli
from pipelines.failure_line import MAX_LENGTH, failure_line

# what Spark gives for a foreachBatch function that raised (abridged from a real one)
STREAM_FAILED = """[STREAM_FAILED] Query [id = 1b2c, runId = 9f8e] terminated with exception: \
An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/work/main/pipelines/silver/batch.py", line 183, in __call__
    self._process(bronze, int(batch_id), stats, persisted)
  File "/work/main/codec/http_registry.py", line 97, in schema_by_id
    raise RegistryUnavailable(f"registry at {self.url} unavailable ({exc})")
codec.errors.RegistryUnavailable: registry at http://127.0.0.1:1 unavailable (connection refused)

\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.runBatch(MicroBatchExecution.scala:900)
Caused by: java.lang.RuntimeException: org.apache.spark.api.python.PythonException: failed
\tat scala.Option.foreach(Option.scala:437)
"""


class _JvmError:
    """A Py4J JVM exception object: its cause and its text."""

    def __init__(self, text: str, cause: _JvmError | None = None) -> None:
        self.text, self.cause = text, cause

    def getCause(self) -> _JvmError | None:  # noqa: N802 - the JVM's name
        return self.cause

    def toString(self) -> str:  # noqa: N802
        return self.text


class _Py4JError(Exception):
    def __init__(self, java: _JvmError) -> None:
        super().__init__("An error occurred while calling o42.start.\n: " + java.text)
        self.java_exception = java


def test_the_python_cause_inside_a_streaming_failure_is_the_line() -> None:
    assert failure_line(RuntimeError(STREAM_FAILED)) == (
        "RegistryUnavailable: registry at http://127.0.0.1:1 unavailable (connection refused)"
    )


def test_a_jvm_chain_is_told_by_its_root() -> None:
    root = _JvmError("org.apache.kafka.common.errors.SaslAuthenticationException: bad credentials")
    exc = _Py4JError(_JvmError("org.apache.spark.SparkException: job aborted", root))
    assert failure_line(exc) == root.text


def test_credentials_in_a_url_of_the_cause_are_hidden() -> None:
    exc = RuntimeError(
        "codec.errors.RegistryUnavailable: registry at https://u:s3cr@t@reg:8081 down"
    )
    assert failure_line(exc) == "RegistryUnavailable: registry at https://***@reg:8081 down"


def test_a_plain_error_is_its_first_line_cut_to_length() -> None:
    assert failure_line(RuntimeError("\nKafka at 127.0.0.1:1 did not answer\nmore")) == (
        "RuntimeError: Kafka at 127.0.0.1:1 did not answer"
    )
    assert failure_line(KeyError("topic")) == "KeyError: 'topic'"
    long = failure_line(RuntimeError("x" * 1000))
    assert len(long) == MAX_LENGTH and long.endswith("...")
    assert failure_line(RuntimeError()) == "RuntimeError"


@pytest.fixture
def failing_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``failcmd`` command whose run raises what a streaming query raises."""
    module = types.ModuleType("pipelines._fail_cmd")

    def add_parser(subparsers: Any) -> None:
        def run(args: argparse.Namespace) -> int:
            raise RuntimeError(STREAM_FAILED)

        subparsers.add_parser("failcmd").set_defaults(func=run)

    module.add_parser = add_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pipelines._fail_cmd", module)
    monkeypatch.setitem(cli.COMMANDS, "failcmd", ("pipelines._fail_cmd", "fails"))


def test_a_command_that_fails_says_why_in_one_line_with_exit_1(
    failing_command: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["failcmd", "--config", "x.toml"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "protolake failcmd: failed: RegistryUnavailable: registry at http://127.0.0.1:1 "
        "unavailable (connection refused)",
        "protolake failcmd: -v shows the whole trace",
    ]


def test_verbose_and_the_submitted_job_keep_the_whole_trace(failing_command: None) -> None:
    with pytest.raises(RuntimeError, match="STREAM_FAILED"):
        cli.main(["failcmd", "--config", "x.toml", "-v"])
    with pytest.raises(RuntimeError, match="STREAM_FAILED"):
        cli.main(["failcmd", "--config", "x.toml"], full_traces=True)
