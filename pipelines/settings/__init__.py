"""protolake's settings: the TOML configuration and its one translation into client settings.

- :mod:`pipelines.settings.config`: the file, validated on load (every key and its default in
  that module's docstring; the rules its values follow in :mod:`pipelines.settings.checks`);
  ``${env:NAME}`` for secrets; a redacted view for logs.
- :mod:`pipelines.settings.clients`: Spark's Kafka source options, librdkafka settings, the
  registry client and the codec's resolver, the Spark session of a job. Every job, command and
  DAG asks it; none builds client options from the file itself.

Environment variables the project reads: ``docs/environment.md``.
"""

from lakehouse.streaming import TRIGGERS
from pipelines.settings.config import (
    ConfigError,
    ProtolakeConfig,
    load_config,
    parse_config,
)

__all__ = ["TRIGGERS", "ConfigError", "ProtolakeConfig", "load_config", "parse_config"]
