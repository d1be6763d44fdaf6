"""Check an object-store lakehouse before a job writes to it: one line naming what is wrong.

:func:`check_lakehouse` runs when a job or command opens its Spark session on an ``s3a://``
lakehouse (:func:`pipelines.settings.clients.open_session` / ``prepare_session``). It reads,
never writes:

1. the endpoint answers a TCP connection (5 s), so that an unreachable store fails at once
   instead of after S3A's and the AWS SDK's retries;
2. the lakehouse's prefix is listed through the session's own S3A file system (the settings
   and credentials the job will use), which tells a missing bucket and refused credentials
   apart.

:func:`check_store` does the same for the readers without a JVM (the DAGs), through the
lakehouse's :class:`lakehouse.store.Store`: the endpoint, then the bucket (HEAD) and the
prefix (LIST) with pyarrow's S3 client.

Failures raise :class:`StoreError`, whose message is one line naming the cause (``endpoint
unreachable``, ``bucket missing``, ``credentials refused``) and the bucket or endpoint, never
a key or secret.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lakehouse.hadoop import hadoop_path
from lakehouse.layout import has_scheme
from lakehouse.store import Store
from pipelines.settings.config import ProtolakeConfig
from pipelines.settings.object_store import CONNECT_TIMEOUT, lakehouse_bucket

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Words of S3A's and the AWS SDK's errors, by cause (refused, missing, unreachable: in that
# order, as a refused request may also speak of something that "does not exist").
_BUCKET_MISSING = (
    "UnknownStoreException",
    "NoSuchBucket",
    "NO_SUCH_BUCKET",
    "ucket does not exist",
)
_REFUSED = (
    "AccessDenied",
    "ACCESS_DENIED",  # pyarrow's names of the same AWS errors
    "INVALID_ACCESS_KEY_ID",
    "SIGNATURE_DOES_NOT_MATCH",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "403",
    "Unable to load AWS credentials",
    "Unable to load credentials",
    "NoAuthWithAWSException",
)
_UNREACHABLE = ("ConnectException", "UnknownHostException", "Connection refused", "timed out")


class StoreError(RuntimeError):
    """The lakehouse's object store cannot be used; the message names the cause."""


def check_lakehouse(spark: SparkSession, cfg: ProtolakeConfig) -> None:
    """Check that the ``s3a://`` lakehouse of ``cfg`` can be listed with its settings.

    Does nothing for a lakehouse on another file system.

    Raises:
        StoreError: the endpoint is unreachable, the bucket is missing, or the credentials
            are refused.
    """
    bucket = lakehouse_bucket(cfg)
    if bucket is None:
        return
    if cfg.s3.endpoint:
        check_endpoint(cfg.s3.endpoint)
    root = cfg.lakehouse.path.rstrip("/")
    try:
        _list_prefix(spark, root)
    except Exception as exc:  # noqa: BLE001 - classified below, or re-raised as it came
        raise StoreError(describe_failure(exc, bucket, cfg.s3.endpoint or "AWS S3")) from None


def check_local_root(spark: SparkSession, cfg: ProtolakeConfig) -> None:
    """Check that Spark reads a plain lakehouse path as the local folder protolake reads.

    A path without a scheme (``/data/lakehouse``) is a local folder to protolake (its small
    appends by delta-rs, checkpoint locks, Data Docs), but Hadoop resolves it against
    ``fs.defaultFS``: on a cluster whose default file system is HDFS, Spark would write one
    lakehouse and protolake another. Such a path is refused; ``file:///...`` (a folder every
    node shares) or ``hdfs://...`` says which is meant.

    Raises:
        StoreError: the path has no scheme and the default file system is not ``file:``.
    """
    root = cfg.lakehouse_path
    if has_scheme(root):
        return
    jconf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    default_fs = str(jconf.get("fs.defaultFS") or "file:///")
    if default_fs.startswith("file:"):
        return
    raise StoreError(
        f"lakehouse.path {root!r} has no scheme, and this Spark's default file system is "
        f"{default_fs}: write file://{root if root.startswith('/') else '/' + root} for a "
        f"folder every node shares, or {default_fs.rstrip('/')}/... for that file system"
    )


def check_store(cfg: ProtolakeConfig, store: Store) -> None:
    """Check that the ``s3a://`` lakehouse of ``cfg`` can be listed through ``store`` (its
    :func:`pipelines.settings.object_store.lakehouse_store`). Nothing for another lakehouse.

    Raises:
        StoreError: the endpoint is unreachable, the bucket is missing, or the credentials
            are refused (one line; no key or secret in it).
    """
    from pyarrow import fs

    bucket = lakehouse_bucket(cfg)
    if bucket is None:
        return
    endpoint = cfg.s3.endpoint or "AWS S3"
    if cfg.s3.endpoint:
        check_endpoint(cfg.s3.endpoint)
    try:
        found = store.filesystem.get_file_info(bucket).type != fs.FileType.NotFound
        if found:
            store.files(cfg.lakehouse.path)  # a LIST of the prefix: refused keys fail here
    except Exception as exc:  # noqa: BLE001 - classified below
        raise StoreError(store.scrub(describe_failure(exc, bucket, endpoint))) from None
    if not found:
        raise StoreError(f"s3 bucket missing: {bucket!r} does not exist at {endpoint}")


def check_endpoint(endpoint: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Open (and close) a TCP connection to the endpoint's host and port.

    Raises:
        StoreError: no connection within ``timeout`` seconds.
    """
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise StoreError(
            f"s3 endpoint unreachable: {endpoint} ({exc.strerror or type(exc).__name__})"
        ) from None


def describe_failure(exc: BaseException, bucket: str, endpoint: str) -> str:
    """One line naming why listing the lakehouse failed (S3A's error words, by cause)."""
    text = str(exc)
    if any(word in text for word in _REFUSED):
        return (
            f"s3 credentials refused: {endpoint} denied access to bucket {bucket!r} "
            "(check s3.access_key_id / s3.secret_access_key or the AWS provider chain)"
        )
    if any(word in text for word in _BUCKET_MISSING):
        return f"s3 bucket missing: {bucket!r} does not exist at {endpoint}"
    if any(word in text for word in _UNREACHABLE):
        return f"s3 endpoint unreachable: {endpoint}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return f"s3 lakehouse bucket {bucket!r} unusable at {endpoint}: {first[:300]}"


def _list_prefix(spark: SparkSession, root: str) -> None:
    """Probe the lakehouse prefix through the session's S3A file system (a HEAD and a LIST of
    the bucket: a missing bucket and refused credentials fail here; a missing prefix does not)."""
    _, path, fs = hadoop_path(spark, root + "/")
    fs.exists(path)
