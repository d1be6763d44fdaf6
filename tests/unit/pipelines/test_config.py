"""pipelines.settings: TOML validated on load, ${env:NAME} secrets, a redacted view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipelines.settings import ConfigError, ProtolakeConfig, load_config, parse_config
from pipelines.settings.redaction import redact_url

MINIMAL = """
[kafka]
bootstrap_servers = "127.0.0.1:9092"
topics = ["shop.orders"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "protolake.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_file_gets_documented_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL))
    assert cfg.kafka.topics == ("shop.orders",)
    assert cfg.kafka.starting_offsets == "earliest"
    assert cfg.kafka.fail_on_data_loss is True
    assert cfg.bronze.table_mode == "per_topic"
    assert cfg.bronze.partition_by == ("_ingest_date",)
    assert cfg.bronze.trigger == "available-now"
    assert cfg.source == str(tmp_path / "protolake.toml")


def test_relative_lakehouse_path_resolves_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write(tmp_path, MINIMAL + '\n[lakehouse]\npath = "lh"\n'))
    assert cfg.lakehouse_path == str(tmp_path / "lh")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ('[kafka]\nbootstraps_servers = "x"\n', "kafka.bootstraps_servers"),
        ("[bronze]\ntable_mod = 'single'\n", "bronze.table_mod"),
        ("[bronz]\ntrigger = 'available-now'\n", "bronz"),
    ],
)
def test_unknown_key_is_an_error_naming_it(tmp_path: Path, extra: str, named: str) -> None:
    text = MINIMAL.replace("[kafka]\n", "[kafka]\n" + extra.split("\n", 1)[1], 1)
    if not extra.startswith("[kafka]"):
        text = MINIMAL + extra
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert str(err.value).startswith(named + ":")
    assert "unknown" in str(err.value)


def test_missing_bootstrap_servers_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^kafka\.bootstrap_servers: missing value"):
        load_config(write(tmp_path, '[kafka]\ntopics = ["a"]\n'))


def test_topics_and_pattern_exactly_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="kafka.topics / kafka.topic_pattern"):
        load_config(write(tmp_path, '[kafka]\nbootstrap_servers = "h:1"\n'))
    with pytest.raises(ConfigError, match="kafka.topics / kafka.topic_pattern"):
        load_config(write(tmp_path, MINIMAL + 'topic_pattern = "shop\\\\..*"\n'))


@pytest.mark.parametrize(
    ("section", "line", "named"),
    [
        ("kafka", "max_offsets_per_trigger = 'many'", "kafka.max_offsets_per_trigger"),
        ("kafka", "fail_on_data_loss = 'yes'", "kafka.fail_on_data_loss"),
        ("bronze", "partition_by = '_ingest_date'", "bronze.partition_by"),
        ("bronze", "table_mode = 'one'", "bronze.table_mode"),
        ("bronze", "trigger = 'once'", "bronze.trigger"),
        ("kafka", "max_offsets_per_trigger = -1", "kafka.max_offsets_per_trigger"),
        ("metrics", "prometheus_port = 70000", "metrics.prometheus_port"),
        ("metrics", "prometheus_port = 65535", "metrics.prometheus_port"),
        ("metrics", "prometheus_address = ' '", "metrics.prometheus_address"),
        ("catalog", "metastore_uri = 'http://h:9083'", "catalog.metastore_uri"),
        ("catalog", "silver_database = 'my-silver'", "catalog.silver_database"),
        (
            "catalog",
            "bronze_database = 'lake'\nquarantine_database = 'Lake'",
            "catalog.bronze_database / catalog.quarantine_database: one database each",
        ),
    ],
)
def test_invalid_values_name_the_key(tmp_path: Path, section: str, line: str, named: str) -> None:
    text = MINIMAL + line + "\n" if section == "kafka" else MINIMAL + f"[{section}]\n{line}\n"
    with pytest.raises(ConfigError, match="^" + named.replace(".", r"\.")):
        load_config(write(tmp_path, text))


def test_missing_file_and_bad_toml_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[kafka\n"))


def test_env_substitution_anywhere_in_a_string(tmp_path: Path) -> None:
    text = MINIMAL.replace('"127.0.0.1:9092"', '"${env:PL_HOST}:${env:PL_PORT}"') + (
        '[kafka.options]\n"sasl.jaas.config" = "user=\\"u\\" password=\\"${env:PL_SECRET}\\";"\n'
    )
    cfg = load_config(
        write(tmp_path, text), env={"PL_HOST": "broker", "PL_PORT": "9093", "PL_SECRET": "s3cr3t"}
    )
    assert cfg.kafka.bootstrap_servers == "broker:9093"
    assert cfg.kafka.options["sasl.jaas.config"] == 'user="u" password="s3cr3t";'


def test_env_substitution_reads_os_environ_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PL_TOPIC_FROM_ENV", "from.env")
    cfg = load_config(
        write(tmp_path, MINIMAL.replace('"shop.orders"', '"${env:PL_TOPIC_FROM_ENV}"'))
    )
    assert cfg.kafka.topics == ("from.env",)


def test_unset_env_var_is_an_error_naming_key_and_variable(tmp_path: Path) -> None:
    text = MINIMAL + '[kafka.options]\n"sasl.jaas.config" = "${env:PL_NOT_SET_ANYWHERE}"\n'
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), env={})
    assert "kafka.options.sasl.jaas.config" in str(err.value)
    assert "PL_NOT_SET_ANYWHERE" in str(err.value)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ('basic_auth = ["${env:PL_SECRET}"]', "an array"),
        ('basic_auth = { u = "${env:PL_SECRET}" }', "a table"),
        ('max_retries = ["${env:PL_SECRET}"]', "an array"),
        ('max_retries = "${env:PL_SECRET}"', "a string"),
    ],
)
def test_a_value_of_the_wrong_kind_is_named_by_its_kind_never_its_text(
    tmp_path: Path, line: str, kind: str
) -> None:
    text = MINIMAL + f'[registry]\nurl = "http://127.0.0.1:8081"\n{line}\n'
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), env={"PL_SECRET": "alice:S3cretPassw0rd"})
    assert f"got {kind}" in str(err.value) and "S3cret" not in str(err.value)
    with pytest.raises(ConfigError, match=r"must be an integer, got 2\.5"):
        load_config(write(tmp_path, MINIMAL + "[registry]\nmax_retries = 2.5\n"))


SECRETS = {
    "PL_JAAS": "jaas-value-Xq1",
    "PL_TRUST": "truststore-pw-Xq2",
    "PL_REG_AUTH": "reg-user:reg-pass-Xq3",
    "PL_TOKEN": "bearer-Xq4",
    "PL_URL_PW": "url-pw-Xq5",
}


def secret_config(tmp_path: Path, auth: str = "basic_auth") -> ProtolakeConfig:
    """Every kind of secret; the registry's credentials as ``auth`` (basic or bearer: one)."""
    text = MINIMAL + (
        "[kafka.options]\n"
        '"security.protocol" = "SASL_SSL"\n'
        '"sasl.jaas.config" = "${env:PL_JAAS}"\n'
        '"ssl.truststore.password" = "${env:PL_TRUST}"\n'
        "[registry]\n"
        'url = "https://svc:${env:PL_URL_PW}@registry.example:8081"\n'
        + (
            'basic_auth = "${env:PL_REG_AUTH}"\n'
            if auth == "basic_auth"
            else 'bearer_token = "${env:PL_TOKEN}"\n'
        )
    )
    return load_config(write(tmp_path, text), env=SECRETS)


@pytest.mark.parametrize("auth", ["basic_auth", "bearer_token"])
def test_redacted_view_never_shows_a_secret(tmp_path: Path, auth: str) -> None:
    cfg = secret_config(tmp_path, auth)
    assert (
        getattr(cfg.registry, auth)
        == SECRETS[  # the real value is kept
            "PL_REG_AUTH" if auth == "basic_auth" else "PL_TOKEN"
        ]
    )
    dumped = json.dumps(cfg.redacted())
    for secret in SECRETS.values():
        assert secret not in dumped
        assert secret.split(":")[-1] not in dumped
    view = cfg.redacted()
    assert view["kafka"]["options"]["security.protocol"] == "SASL_SSL"  # not secret: kept
    assert view["kafka"]["options"]["sasl.jaas.config"] == "***"
    assert view["registry"]["url"] == "https://***@registry.example:8081"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://svc:p@ss@registry.example:8081", "https://***@registry.example:8081"),
        ("https://svc:p@ss@host/sub@path?a=b", "https://***@host/sub@path?a=b"),
        (
            "see http://u:pw@a.example/x and https://b.example/y",
            "see http://***@a.example/x and https://b.example/y",
        ),
        ("s3a://bucket/prefix@2026", "s3a://bucket/prefix@2026"),
        ("http://127.0.0.1:8081", "http://127.0.0.1:8081"),
    ],
)
def test_a_urls_user_info_is_hidden_whole(url: str, shown: str) -> None:
    """A password holding "@" is hidden whole, not cut at its own "@"; a path's "@" stays."""
    assert redact_url(url) == shown


def test_errors_do_not_echo_secret_values(tmp_path: Path) -> None:
    # A wrongly typed value may be shown (it is in the file), but a value from the
    # environment must not reach an error message through a later check.
    text = MINIMAL + '[bronze]\ntable_mode = "${env:PL_JAAS}"\n'
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), env=SECRETS)
    assert SECRETS["PL_JAAS"] not in str(err.value)


def test_parse_config_validates_a_mapping() -> None:
    cfg = parse_config({"kafka": {"bootstrap_servers": "h:1", "topic_pattern": "a.*"}})
    assert cfg.kafka.topic_pattern == "a.*"
    with pytest.raises(ConfigError, match=r"^kafka: must be a table"):
        parse_config({"kafka": "h:1"})


@pytest.mark.parametrize(
    "line",
    [
        'fail_on_data_loss = "${env:PL_JAAS}"',
        'max_offsets_per_trigger = "${env:PL_JAAS}"',
    ],
)
def test_type_errors_do_not_echo_env_values(tmp_path: Path, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, MINIMAL + line + "\n"), env=SECRETS)
    assert str(err.value).startswith("kafka." + line.split(" ")[0] + ": must be")
    assert SECRETS["PL_JAAS"] not in str(err.value)


BROKEN_RULE = """
[[quality.expectations]]
message_type = "shop.v1.Customer"
expectation = "expect_column_values_to_match_regex"
kwargs = { column = "email", regex = "([" }
"""


def test_quality_rules_are_checked_when_the_config_is_loaded(tmp_path: Path) -> None:
    # bronze loads the same file: a rule silver cannot run must stop it as well
    with pytest.raises(ConfigError, match=r"quality.expectations\[0\].*invalid regular expression"):
        load_config(write(tmp_path, MINIMAL + BROKEN_RULE))
    with pytest.raises(ConfigError, match="unknown Great Expectations expectation"):
        load_config(write(tmp_path, MINIMAL + BROKEN_RULE.replace("match_regex", "match_regexp")))
    good = BROKEN_RULE.replace('"(["', r'"^[^@\\s]+@.+$"')
    assert len(load_config(write(tmp_path, MINIMAL + good)).quality.expectations) == 1


def test_quality_results_retention(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, MINIMAL)).quality.results_retention_days == 0
    cfg = load_config(write(tmp_path, MINIMAL + "[quality]\nresults_retention_days = 30\n"))
    assert cfg.quality.results_retention_days == 30
    with pytest.raises(ConfigError, match="quality.results_retention_days"):
        load_config(write(tmp_path, MINIMAL + "[quality]\nresults_retention_days = -1\n"))


def test_stream_maintenance_intervals(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL))
    assert (cfg.maintenance.stream_optimize_minutes, cfg.maintenance.stream_vacuum_hours) == (
        60.0,
        24.0,
    )
    text = MINIMAL + "[maintenance]\nstream_optimize_minutes = 15\nstream_vacuum_hours = 0\n"
    cfg = load_config(write(tmp_path, text))
    assert (cfg.maintenance.stream_optimize_minutes, cfg.maintenance.stream_vacuum_hours) == (
        15.0,
        0.0,
    )
    with pytest.raises(ConfigError, match="maintenance.stream_optimize_minutes"):
        load_config(write(tmp_path, MINIMAL + "[maintenance]\nstream_optimize_minutes = -5\n"))
    assert cfg.maintenance.stream_retention_hours == 168.0
    with pytest.raises(ConfigError, match="stream_retention_hours: must be >= 168"):
        load_config(write(tmp_path, MINIMAL + "[maintenance]\nstream_retention_hours = 24\n"))


def test_layers_may_leave_their_database_out_together(tmp_path: Path) -> None:
    text = MINIMAL + "[catalog]\nbronze_database = ''\nquality_database = ''\n"
    cfg = load_config(write(tmp_path, text))
    assert (cfg.catalog.bronze_database, cfg.catalog.quality_database) == ("", "")


def test_catalog_defaults_and_session_settings(tmp_path: Path) -> None:
    from lakehouse.catalog import CatalogDatabases
    from pipelines.settings.clients import catalog_databases, catalog_session_conf

    cfg = load_config(write(tmp_path, MINIMAL))
    assert catalog_databases(cfg) == CatalogDatabases("bronze", "silver", "quarantine", "quality")
    assert catalog_session_conf(cfg) == {}  # the session's own catalog
    text = MINIMAL + '[catalog]\nmetastore_uri = "thrift://127.0.0.1:9083"\nbronze_database = ""\n'
    cfg = load_config(write(tmp_path, text))
    assert catalog_databases(cfg).bronze == "" and catalog_databases(cfg).silver == "silver"
    assert catalog_session_conf(cfg) == {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": "thrift://127.0.0.1:9083",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[registry]\nbasic_auth = "u:p"\nbearer_token = "t"\n',
            "registry.basic_auth / registry.bearer_token: give one, not both",
        ),
        (
            '[registry]\nurl = "htp://registry:8081"\n',
            "registry.url: must be http(s)://host[:port], dir:/folder or a folder, "
            "got 'htp://registry:8081'",
        ),
        (
            '[registry]\nurl = "localhost:8081"\n',
            "registry.url: must be http(s)://host[:port], dir:/folder or a folder, "
            "got 'localhost:8081'",
        ),
        (
            '[registry]\nurl = "http:/registry:8081"\n',
            "registry.url: must be http(s)://host[:port], dir:/folder or a folder, "
            "got 'http:/registry:8081'",
        ),
        (
            '[bronze]\npartition_by = ["nope"]\n',
            "bronze.partition_by: nope is no bronze column",
        ),
    ],
)
def test_settings_a_job_would_trip_on_are_refused_on_load(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write(tmp_path, MINIMAL + text))


def test_a_folder_registry_and_the_bronze_partition_columns_load(tmp_path: Path) -> None:
    """A folder registry is taken as written: the host that runs the job has it, not always
    the one that loads the configuration (an Airflow worker)."""
    folder = tmp_path / "on-the-cluster-only"
    text = f'[registry]\nurl = "{folder}"\n[bronze]\npartition_by = ["_ingest_date", "topic"]\n'
    cfg = load_config(write(tmp_path, MINIMAL + text))
    assert cfg.registry.url == str(folder)
    assert cfg.bronze.partition_by == ("_ingest_date", "topic")


def test_a_folder_or_a_binary_file_is_no_configuration(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a folder, not a configuration file"):
        load_config(tmp_path)
    binary = tmp_path / "protolake.toml"
    binary.write_bytes(b"\xff\xfe[kafka]\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(binary)
