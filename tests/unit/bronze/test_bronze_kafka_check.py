"""``protolake bronze`` checks Kafka before it starts Spark (``clients.check_kafka``): Spark's
Kafka source would retry a cluster that does not answer without end, a warning a second."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.settings import load_config
from pipelines.settings.clients import KafkaUnreachableError, check_kafka


def _config(tmp_path: Path, bootstrap: str) -> Path:
    path = tmp_path / "protolake.toml"
    path.write_text(
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\ntopics = ["t"]\n'
        f'[lakehouse]\npath = "{tmp_path / "lake"}"\n'
    )
    return path


def test_a_cluster_that_does_not_answer_is_an_error_in_time(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, "127.0.0.1:1"))
    started = time.monotonic()
    with pytest.raises(
        KafkaUnreachableError, match=r"Kafka at 127\.0\.0\.1:1 did not answer in 2 s"
    ):
        check_kafka(cfg, timeout=2)
    assert time.monotonic() - started < 30


def test_bronze_says_so_in_one_line_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, "127.0.0.1:1")
    assert cli.main(["bronze", "--config", str(config)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith(
        "protolake bronze: failed: KafkaUnreachableError: Kafka at 127.0.0.1:1 did not answer in 10 s"
    )
    assert err[-1] == "protolake bronze: -v shows the whole trace"
    assert not (tmp_path / "lake").exists()  # nothing started, nothing written


def test_a_cluster_with_connection_options_is_left_to_the_job(tmp_path: Path) -> None:
    """Spark's Java client takes settings librdkafka cannot (here a JKS truststore): such a
    cluster is not checked, rather than refused by a check the job would pass."""
    path = _config(tmp_path, "127.0.0.1:1")
    path.write_text(
        path.read_text()
        + '[kafka.options]\n"security.protocol" = "SSL"\n'
        + '"ssl.truststore.location" = "/etc/kafka/truststore.jks"\n'
    )
    started = time.monotonic()
    check_kafka(load_config(path), timeout=5)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    ("options", "checked"),
    [
        ('"client.id" = "ingest"\n"security.protocol" = "PLAINTEXT"\n', True),
        ('"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "GSSAPI"\n', False),
    ],
    ids=["librdkafka-settings", "mechanism-librdkafka-lacks"],
)
def test_options_librdkafka_takes_are_checked_with_the_others_left_to_the_job(
    tmp_path: Path, options: str, checked: bool
) -> None:
    path = _config(tmp_path, "127.0.0.1:1")
    path.write_text(path.read_text() + "[kafka.options]\n" + options)
    cfg = load_config(path)
    if checked:
        with pytest.raises(KafkaUnreachableError):
            check_kafka(cfg, timeout=2)
    else:
        check_kafka(cfg, timeout=2)  # the pip wheel's librdkafka has no GSSAPI: not checked
