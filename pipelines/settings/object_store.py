"""The one translation of ``[s3]``, the object store of an ``s3a://`` (or ``s3://``)
lakehouse, into each client's settings. Values may be secrets: hand them to the client, never
log them.

- :func:`lakehouse_bucket`: the lakehouse's bucket, or None when it is not on S3.
- :func:`s3a_hadoop_conf`: S3A settings of that bucket (Hadoop's per-bucket
  ``fs.s3a.bucket.<bucket>.*`` keys: other buckets keep their own settings), which
  ``pipelines.settings.clients.open_session`` gives the jobs' sessions.
- :func:`delta_storage_options`: delta-rs (``deltalake``) storage options, for the readers and
  writers without Spark (quality results, the DAGs' table figures, tests).
- :func:`lakehouse_store`: the lakehouse's :class:`lakehouse.store.Store` for the readers
  without a JVM (the DAGs' tables and checkpoints): a pyarrow ``S3FileSystem`` from ``[s3]``
  with :func:`delta_storage_options`, or this machine's file system.
"""

from __future__ import annotations

from typing import Any

from lakehouse.layout import Layout, has_scheme
from lakehouse.store import OBJECT_STORE_SCHEMES, Store
from pipelines.settings.config import ProtolakeConfig

#: seconds to connect to the object store (its client here, and the check before a job)
CONNECT_TIMEOUT = 5.0
# S3A's credential providers: static keys (with a session token: temporary ones), or the AWS
# SDK's default chain (environment, system properties, web identity, ~/.aws profiles,
# container and instance roles).
_STATIC_KEYS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY_KEYS = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
_DEFAULT_CHAIN = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"


def lakehouse_bucket(cfg: ProtolakeConfig) -> str | None:
    """The bucket of an ``s3a://bucket/prefix`` lakehouse; None for any other root."""
    root = cfg.lakehouse.path
    if not has_scheme(root) or root.split("://", 1)[0].lower() not in OBJECT_STORE_SCHEMES:
        return None
    return root.split("://", 1)[1].split("/", 1)[0]


def s3a_hadoop_conf(cfg: ProtolakeConfig) -> dict[str, str]:
    """``[s3]`` as Hadoop S3A settings of the lakehouse's bucket (values may be secret).

    Empty when the lakehouse is not on S3. Keys are per bucket (``fs.s3a.bucket.<b>.endpoint``,
    ...); ``clients.open_session`` passes them as ``spark.hadoop.*`` settings.
    """
    bucket = lakehouse_bucket(cfg)
    if bucket is None:
        return {}
    s3 = cfg.s3
    conf: dict[str, str] = {
        "path.style.access": "true" if s3.path_style_access else "false",
        # If-None-Match puts, for the writer leases of lakehouse.lease
        "create.conditional.enabled": "true",
    }
    if s3.endpoint:
        conf["endpoint"] = s3.endpoint.rstrip("/")
        conf["connection.ssl.enabled"] = "true" if s3.endpoint.startswith("https:") else "false"
    if s3.region:
        conf["endpoint.region"] = s3.region
    elif s3.endpoint:
        conf["endpoint.region"] = "us-east-1"  # an S3-compatible store: any region signs
    if s3.access_key_id:
        conf["access.key"] = s3.access_key_id
        conf["secret.key"] = s3.secret_access_key
        conf["aws.credentials.provider"] = _STATIC_KEYS
        if s3.session_token:
            conf["session.token"] = s3.session_token
            conf["aws.credentials.provider"] = _TEMPORARY_KEYS
    else:
        conf["aws.credentials.provider"] = _DEFAULT_CHAIN
    settings = {f"fs.s3a.bucket.{bucket}.{key}": value for key, value in conf.items()}
    if cfg.lakehouse.path.split("://", 1)[0].lower() == "s3":
        # Hadoop has no file system for s3:// of its own: S3A serves it, with the same settings
        settings["fs.s3.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        settings["fs.AbstractFileSystem.s3.impl"] = "org.apache.hadoop.fs.s3a.S3A"
    return settings


def delta_storage_options(cfg: ProtolakeConfig) -> dict[str, str]:
    """``[s3]`` as delta-rs storage options (empty for a local lakehouse; values may be secret).

    Without keys in ``[s3]``, delta-rs finds credentials as the AWS SDKs do (environment,
    profiles, instance roles).
    """
    if lakehouse_bucket(cfg) is None:
        return {}
    s3 = cfg.s3
    opts: dict[str, str] = {
        "AWS_REGION": s3.region or "us-east-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if s3.path_style_access else "true",
    }
    if s3.endpoint:
        opts["AWS_ENDPOINT_URL"] = s3.endpoint.rstrip("/")
        if s3.endpoint.startswith("http:"):
            opts["AWS_ALLOW_HTTP"] = "true"
    if s3.access_key_id:
        opts["AWS_ACCESS_KEY_ID"] = s3.access_key_id
        opts["AWS_SECRET_ACCESS_KEY"] = s3.secret_access_key
        if s3.session_token:
            opts["AWS_SESSION_TOKEN"] = s3.session_token
    return opts


def lakehouse_store(cfg: ProtolakeConfig) -> Store | None:
    """The lakehouse's files without a JVM: for an ``s3a://`` lakehouse a pyarrow
    ``S3FileSystem`` with ``[s3]`` (keys, else the AWS default chain; the endpoint, its scheme,
    the region and the addressing style) and :func:`delta_storage_options`; for a local one,
    this machine's file system; None for any other file system (``abfss://``, ``gs://``, ...).

    The store holds credentials: hand it to readers, never log it.
    """
    if lakehouse_bucket(cfg) is None:
        return Store.local() if Layout(cfg.lakehouse_path).is_local else None
    from pyarrow import fs

    s3 = cfg.s3
    options: dict[str, Any] = {
        "region": s3.region or "us-east-1",
        "force_virtual_addressing": not s3.path_style_access,
        "connect_timeout": CONNECT_TIMEOUT,
        "request_timeout": 30.0,
    }
    if s3.endpoint:
        scheme, _, host = s3.endpoint.rstrip("/").partition("://")
        options.update(endpoint_override=host, scheme=scheme)
    if s3.access_key_id:
        options.update(
            access_key=s3.access_key_id,
            secret_key=s3.secret_access_key,
            session_token=s3.session_token or None,
        )
    filesystem = fs.S3FileSystem(**options)
    return Store(filesystem, delta_storage_options(cfg), object_store=True)
