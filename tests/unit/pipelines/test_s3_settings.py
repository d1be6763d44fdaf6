"""[s3]: validated on load, translated once into S3A and delta-rs settings, never logged."""

from __future__ import annotations

import json

import pytest

from pipelines.settings import ConfigError, parse_config
from pipelines.settings.clients import loggable_config
from pipelines.settings.object_store import (
    delta_storage_options,
    lakehouse_bucket,
    lakehouse_store,
    s3a_hadoop_conf,
)
from pipelines.settings.preflight import describe_failure

KAFKA = {"bootstrap_servers": "127.0.0.1:9092", "topics": ["t"]}
ENV = {"KEY": "AKIDEXAMPLE", "SECRET": "s3cr3t-value"}


def s3_config(path: str = "s3a://lake/prefix", **s3: object) -> object:
    raw = {"kafka": KAFKA, "lakehouse": {"path": path}, "s3": s3}
    return parse_config(raw, env=ENV)


def test_keys_from_the_environment_become_per_bucket_s3a_settings() -> None:
    cfg = s3_config(
        endpoint="http://127.0.0.1:8333",
        path_style_access=True,
        access_key_id="${env:KEY}",
        secret_access_key="${env:SECRET}",
    )
    conf = s3a_hadoop_conf(cfg)  # type: ignore[arg-type]
    assert conf == {
        "fs.s3a.bucket.lake.path.style.access": "true",
        "fs.s3a.bucket.lake.create.conditional.enabled": "true",
        "fs.s3a.bucket.lake.endpoint": "http://127.0.0.1:8333",
        "fs.s3a.bucket.lake.connection.ssl.enabled": "false",
        "fs.s3a.bucket.lake.endpoint.region": "us-east-1",
        "fs.s3a.bucket.lake.access.key": "AKIDEXAMPLE",
        "fs.s3a.bucket.lake.secret.key": "s3cr3t-value",
        "fs.s3a.bucket.lake.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
    }
    opts = delta_storage_options(cfg)  # type: ignore[arg-type]
    assert opts["AWS_ENDPOINT_URL"] == "http://127.0.0.1:8333"
    assert opts["AWS_ALLOW_HTTP"] == "true"
    assert opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    assert (opts["AWS_ACCESS_KEY_ID"], opts["AWS_SECRET_ACCESS_KEY"]) == (
        "AKIDEXAMPLE",
        "s3cr3t-value",
    )


def test_without_keys_the_default_aws_chain_is_used() -> None:
    cfg = s3_config(region="eu-west-1")
    conf = s3a_hadoop_conf(cfg)  # type: ignore[arg-type]
    assert conf["fs.s3a.bucket.lake.aws.credentials.provider"] == (
        "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
    )
    assert conf["fs.s3a.bucket.lake.endpoint.region"] == "eu-west-1"
    assert not any("key" in k for k in conf)
    opts = delta_storage_options(cfg)  # type: ignore[arg-type]
    assert opts == {"AWS_REGION": "eu-west-1", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}


def test_a_session_token_chooses_temporary_credentials() -> None:
    cfg = s3_config(access_key_id="a", secret_access_key="b", session_token="t")
    conf = s3a_hadoop_conf(cfg)  # type: ignore[arg-type]
    assert conf["fs.s3a.bucket.lake.session.token"] == "t"
    assert conf["fs.s3a.bucket.lake.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider"
    )


@pytest.mark.parametrize(
    "path", ["./lakehouse", "file:///tmp/lh", "abfss://c@a.dfs.core.windows.net/x"]
)
def test_no_s3_settings_for_other_lakehouses(path: str) -> None:
    cfg = s3_config(path, endpoint="http://127.0.0.1:1")
    assert lakehouse_bucket(cfg) is None  # type: ignore[arg-type]
    assert s3a_hadoop_conf(cfg) == {}  # type: ignore[arg-type]
    assert delta_storage_options(cfg) == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("s3", "named"),
    [
        ({"access_key_id": "a"}, "s3.access_key_id / s3.secret_access_key"),
        ({"session_token": "t"}, "s3.session_token"),
        ({"endpoint": "127.0.0.1:8333"}, "s3.endpoint"),
        ({"endpoint": "http://key:secret-Xq9@127.0.0.1:8333"}, "s3.endpoint: no credentials"),
        ({"path_style_access": "yes"}, "s3.path_style_access"),
        ({"bucket": "x"}, "s3.bucket: unknown key"),
    ],
)
def test_bad_s3_settings_name_the_key(s3: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as err:
        s3_config(**s3)
    assert "secret-Xq9" not in str(err.value)


def test_credentials_never_reach_the_loggable_view() -> None:
    cfg = s3_config(access_key_id="${env:KEY}", secret_access_key="${env:SECRET}")
    text = json.dumps(loggable_config(cfg))  # type: ignore[arg-type]
    assert "AKIDEXAMPLE" not in text and "s3cr3t-value" not in text
    assert json.loads(text)["s3"]["secret_access_key"] == "***"


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (
            "org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://lake/': Bucket does not exist",
            "bucket missing",
        ),
        (
            "java.nio.file.AccessDeniedException: s3a://lake/: getFileStatus: 403 Forbidden",
            "credentials refused",
        ),
        (
            "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist",
            "credentials refused",
        ),
        ("java.net.ConnectException: Connection refused", "endpoint unreachable"),
        (  # pyarrow's S3 client
            "When getting information for bucket 'lake': AWS Error ACCESS_DENIED during "
            "HeadBucket operation: No response body.",
            "credentials refused",
        ),
        (
            "When listing objects under key 'lh/' in bucket 'lake': AWS Error "
            "SIGNATURE_DOES_NOT_MATCH during ListObjectsV2 operation",
            "credentials refused",
        ),
    ],
)
def test_store_errors_are_named_in_one_line(error: str, cause: str) -> None:
    line = describe_failure(RuntimeError(error), "lake", "http://127.0.0.1:8333")
    assert line.startswith(f"s3 {cause}") and "\n" not in line


def test_the_store_without_a_jvm_reads_s3_with_the_same_settings() -> None:
    cfg = s3_config(
        endpoint="http://127.0.0.1:8333",
        region="eu-west-3",
        path_style_access=True,
        access_key_id="${env:KEY}",
        secret_access_key="${env:SECRET}",
    )
    store = lakehouse_store(cfg)  # type: ignore[arg-type]
    assert store is not None and store.object_store
    assert store.storage_options == delta_storage_options(cfg)  # type: ignore[arg-type]
    assert store.filesystem.region == "eu-west-3"
    assert store.fs_path("s3a://lake/prefix/silver/t") == "lake/prefix/silver/t"
    assert "s3cr3t-value" not in repr(store) and "AKIDEXAMPLE" not in repr(store)
    with pytest.raises(ValueError, match="not an s3a://bucket/key path"):
        store.fs_path("/tmp/lake")


@pytest.mark.parametrize("path", ["./lakehouse", "file:///tmp/lh"])
def test_a_local_lakehouse_is_read_from_this_machine(path: str) -> None:
    store = lakehouse_store(s3_config(path))  # type: ignore[arg-type]
    assert store is not None and not store.object_store and store.storage_options == {}
    assert store.serves(path) and not store.serves("s3a://lake/x")


def test_no_store_for_other_file_systems() -> None:
    assert lakehouse_store(s3_config("abfss://c@a.dfs.core.windows.net/x")) is None  # type: ignore[arg-type]
