"""The demo's configuration: ``demo.toml`` beside this module, and the demo's overrides.

:func:`load_demo_config` reads ``--config FILE`` (default: :data:`DEMO_CONFIG`), then applies
the demo's rules on top of it: ``PROTOLAKE_KAFKA_BOOTSTRAP`` / ``PROTOLAKE_REGISTRY_URL``
replace the broker and registry addresses (``PROTOLAKE_METASTORE_PORT`` the metastore's port),
``--lakehouse DIR`` the lakehouse root, and ``kafka.topics`` becomes the demo's four topics under
``--topic-prefix`` (``kafka.topic_pattern`` is dropped). A demo into another lakehouse than the
configured one registers its tables in its session's own catalog, not in the shared metastore:
the metastore's names (``silver.<table>``, ...) belong to the configured lakehouse. An
``s3a://`` lakehouse whose file has no ``[s3]`` section gets one from the standard AWS
variables that ``infra/stack.sh up s3`` writes to ``run/s3.env``: ``AWS_ENDPOINT_URL`` (with
path-style access), ``AWS_REGION``, and the keys as ``${env:AWS_ACCESS_KEY_ID}`` /
``${env:AWS_SECRET_ACCESS_KEY}`` (without them, the AWS default chain). It raises
:class:`pipelines.settings.ConfigError` for a missing or invalid file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.demo.stream import demo_topics
from pipelines.settings import ConfigError, ProtolakeConfig, parse_config

DEMO_CONFIG = Path(__file__).resolve().with_name("demo.toml")
ENV_BOOTSTRAP = "PROTOLAKE_KAFKA_BOOTSTRAP"
ENV_REGISTRY = "PROTOLAKE_REGISTRY_URL"
ENV_METASTORE_PORT = "PROTOLAKE_METASTORE_PORT"


@dataclass
class DemoOptions:
    """What the command line chooses (see :func:`pipelines.demo.main.add_parser`)."""

    config: str | None = None
    lakehouse: str | None = None
    topic_prefix: str = "demo."
    records: int = 3000
    seed: int = 7
    poison_every: int = 50
    append: bool = False


def load_demo_config(
    path: str | os.PathLike[str] | None = None,
    *,
    lakehouse: str | None = None,
    topic_prefix: str = "demo.",
    env: Mapping[str, str] | None = None,
) -> ProtolakeConfig:
    """Load the demo configuration and apply the demo's overrides (module docstring).

    Raises:
        pipelines.settings.ConfigError: the file is missing or invalid.
    """
    environ = os.environ if env is None else env
    source = Path(path) if path is not None else DEMO_CONFIG
    try:
        raw: dict[str, Any] = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {source}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    kafka = raw.setdefault("kafka", {})
    registry = raw.setdefault("registry", {})
    if environ.get(ENV_BOOTSTRAP):
        kafka["bootstrap_servers"] = environ[ENV_BOOTSTRAP]
    if environ.get(ENV_REGISTRY):
        registry["url"] = environ[ENV_REGISTRY]
    catalog = raw.setdefault("catalog", {})
    if environ.get(ENV_METASTORE_PORT) and catalog.get("metastore_uri"):
        catalog["metastore_uri"] = f"thrift://127.0.0.1:{environ[ENV_METASTORE_PORT]}"
    if lakehouse:
        raw.setdefault("lakehouse", {})["path"] = lakehouse
        catalog["metastore_uri"] = ""
    kafka.pop("topic_pattern", None)
    kafka["topics"] = demo_topics(topic_prefix)
    path = str(raw.get("lakehouse", {}).get("path", ""))
    if path.startswith(("s3a://", "s3://")) and "s3" not in raw:
        raw["s3"] = s3_from_environment(environ)
    return parse_config(raw, env=environ, source=str(source))


def s3_from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """An ``[s3]`` section from the standard AWS variables (module docstring)."""
    s3: dict[str, Any] = {}
    if environ.get("AWS_ENDPOINT_URL"):
        s3["endpoint"] = environ["AWS_ENDPOINT_URL"]
        s3["path_style_access"] = True
    if environ.get("AWS_REGION"):
        s3["region"] = environ["AWS_REGION"]
    if environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY"):
        s3["access_key_id"] = "${env:AWS_ACCESS_KEY_ID}"
        s3["secret_access_key"] = "${env:AWS_SECRET_ACCESS_KEY}"
    return s3
