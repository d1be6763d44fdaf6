"""The Airflow worker's settings for protolake, read when a task runs (stdlib and Airflow only).

- ``PROTOLAKE_CONFIG``: the TOML configuration (required);
- ``SPARK_HOME``: a Spark installation; else pyspark's own spark-submit from Airflow's
  environment;
- the Airflow connection ``protolake_registry`` (optional): exported to the jobs as
  ``PROTOLAKE_REGISTRY_URL``, ``PROTOLAKE_REGISTRY_AUTH`` (``login:password``) and
  ``PROTOLAKE_REGISTRY_TOKEN``, which the TOML file references as ``${env:...}``;
- integers a DAG file reads at parse time (:func:`env_int`).

The lakehouse of the configuration is a :class:`lakehouse.layout.Layout` and the
:class:`lakehouse.store.Store` its readers (:mod:`.tables`, :mod:`.progress`) go through
(:func:`open_lakehouse`): local (or mounted) folders, ``file:`` URIs, and ``s3a://`` with the
``[s3]`` settings (keys from ``${env:...}`` or the AWS default chain); for another file system
there is none and they say so in the task log.

Raises :class:`ProtolakeSetupError` (the message says what to do) when the worker is not set
up for protolake.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.layout import Layout
    from lakehouse.store import Store

log = logging.getLogger(__name__)

CONFIG_ENV = "PROTOLAKE_CONFIG"
REGISTRY_CONN_ID = "protolake_registry"
SPARK_CONN_ID = "spark_default"


class ProtolakeSetupError(RuntimeError):
    """The worker's environment is not set up for protolake (the message says what to do)."""


def config_path(environ: Mapping[str, str] | None = None) -> str:
    """``$PROTOLAKE_CONFIG`` as an absolute path; the file must exist.

    Raises:
        ProtolakeSetupError: the variable is unset or the file is missing.
    """
    env = os.environ if environ is None else environ
    raw = env.get(CONFIG_ENV, "")
    if not raw:
        raise ProtolakeSetupError(
            f"{CONFIG_ENV} is not set: export it in the Airflow worker's environment "
            "(the path of protolake's TOML configuration)"
        )
    path = Path(raw).expanduser().resolve()
    if not path.is_file():
        raise ProtolakeSetupError(f"{CONFIG_ENV}={raw}: no such file")
    return str(path)


def env_int(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """An integer from the environment (parse time is fine: stdlib only).

    Raises:
        ValueError: the value is not an integer.
    """
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}: must be an integer, got {raw!r}") from None


def spark_bin_dir(environ: Mapping[str, str] | None = None) -> str:
    """The folder holding spark-submit: ``$SPARK_HOME/bin``, else pyspark's own ``bin``.

    Raises:
        ProtolakeSetupError: neither has a spark-submit.
    """
    import importlib.util

    env = os.environ if environ is None else environ
    home = env.get("SPARK_HOME", "")
    if home:
        folder = Path(home) / "bin"
    else:
        # find_spec locates the package without importing it (pyspark loads slowly)
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise ProtolakeSetupError(
                "spark-submit: SPARK_HOME is unset and pyspark is not installed next to Airflow"
            )
        folder = Path(spec.origin).parent / "bin"
    if not (folder / "spark-submit").is_file():
        raise ProtolakeSetupError(f"spark-submit not found in {folder}")
    return str(folder)


def registry_env() -> dict[str, str]:
    """``PROTOLAKE_REGISTRY_*`` variables from the ``protolake_registry`` connection (if any).

    The connection's host (with schema and port) gives the URL, login and password the basic
    auth, the ``bearer_token`` extra a token. No connection: nothing (the TOML then holds the
    URL, or reads the variables from the worker's own environment).
    """
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(REGISTRY_CONN_ID)
    except Exception as exc:  # AirflowNotFoundException's import path moves between versions
        if "isn't defined" in str(exc) or "not found" in str(exc).lower():
            log.info(
                "no %s connection: registry settings come from the TOML file", REGISTRY_CONN_ID
            )
            return {}
        raise
    out: dict[str, str] = {}
    host = conn.host or ""
    if host:
        if "://" not in host:
            host = f"{conn.schema or 'http'}://{host}"
        out["PROTOLAKE_REGISTRY_URL"] = f"{host}:{conn.port}" if conn.port else host
    if conn.login:
        out["PROTOLAKE_REGISTRY_AUTH"] = f"{conn.login}:{conn.password or ''}"
    token = (conn.extra_dejson or {}).get("bearer_token")
    if token:
        out["PROTOLAKE_REGISTRY_TOKEN"] = str(token)
    return out


def load_job_config(config: str) -> Any:
    """The configuration as the jobs see it (``${env:...}`` from the worker's environment and
    the ``protolake_registry`` connection)."""
    from pipelines.settings import load_config

    return load_config(config, env={**os.environ, **registry_env()})


def kafka_client_options(cfg: Any) -> dict[str, Any]:
    """The probe's librdkafka settings: :func:`pipelines.settings.clients.kafka_client_conf` (the
    translation ``protolake status`` uses: SASL credentials from ``sasl.jaas.config``, SSL
    files, ...), without ``bootstrap.servers`` (passed on its own)."""
    from pipelines.settings.clients import kafka_client_conf

    conf = kafka_client_conf(cfg)
    conf.pop("bootstrap.servers", None)
    return conf


def open_lakehouse(cfg: Any) -> tuple[Layout, Store] | None:
    """The configuration's lakehouse and the store its files are read through, checked.

    A local root is made absolute (relative paths resolve against the task's working
    directory, as the jobs resolve them); an ``s3a://`` root is read with ``[s3]``
    (:func:`pipelines.settings.object_store.lakehouse_store`) once its bucket answers. None, logged,
    for a lakehouse on another file system.

    Raises:
        pipelines.settings.preflight.StoreError: the object store's endpoint is unreachable,
            its bucket missing or the credentials refused (one line naming which).
    """
    from lakehouse.layout import Layout
    from pipelines.settings.object_store import lakehouse_store
    from pipelines.settings.preflight import check_store

    layout = Layout(cfg.lakehouse_path)
    store = lakehouse_store(cfg)
    if store is None:
        log.warning("the lakehouse %s is on a file system the DAGs cannot read", layout.root)
        return None
    if layout.is_local:
        return Layout(str(layout.local_root())), store
    check_store(cfg, store)
    return layout, store
