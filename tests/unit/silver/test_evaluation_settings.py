"""The settings a silver batch runs with, by its record count and what the job's session set.

The sessions here are stand-ins with the two things ``ExpressionEvaluation`` reads of a
session (its settings, the launch's included, and its cores); the settings reaching a real
query's session, and the same rows landing either way, are tested in
``tests/integration/silver_batch/test_batch.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pipelines.silver.evaluation import (
    ADAPTIVE,
    FACTORY_MODE,
    GENERATED,
    INTERPRETED,
    SHUFFLE_PARTITIONS,
    ExpressionEvaluation,
)


class _Settings:
    """A session's runtime settings: ``get`` gives the default of a key it was not set."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = "<spark's default>") -> Any:
        return self.values.get(key, default)


def session(cores: int, launched: dict[str, str], runtime: dict[str, str]) -> Any:
    return SimpleNamespace(
        conf=_Settings({**launched, **runtime}),
        sparkContext=SimpleNamespace(defaultParallelism=cores),
    )


def test_only_what_the_job_set_is_fixed() -> None:
    plain = ExpressionEvaluation.for_session(session(2, {}, {}))
    assert (plain.fixed, plain.adaptive_fixed) == (False, False)
    launched = ExpressionEvaluation.for_session(session(2, {ADAPTIVE: "true"}, {}))
    assert (launched.fixed, launched.adaptive_fixed) == (False, True)
    runtime = ExpressionEvaluation.for_session(session(2, {}, {FACTORY_MODE: GENERATED}))
    assert (runtime.fixed, runtime.adaptive_fixed) == (True, False)
    assert runtime.settings_for(10) == {ADAPTIVE: "false", SHUFFLE_PARTITIONS: "1"}
    assert launched.settings_for(10) == {FACTORY_MODE: INTERPRETED}


def test_a_small_batch_on_a_large_cluster_gets_a_partition_per_ten_thousand_records() -> None:
    cluster = session(200, {}, {ADAPTIVE: "true", SHUFFLE_PARTITIONS: "200"})
    evaluation = ExpressionEvaluation(cluster, fixed=False, adaptive_fixed=False)
    partitions = [evaluation.settings_for(n)[SHUFFLE_PARTITIONS] for n in (1, 10_000, 10_001)]
    assert partitions == ["1", "1", "2"]
    assert evaluation.settings_for(49_999) == {
        FACTORY_MODE: INTERPRETED,
        ADAPTIVE: "false",
        SHUFFLE_PARTITIONS: "5",
    }
    assert evaluation.settings_for(50_000) == {
        FACTORY_MODE: GENERATED,
        ADAPTIVE: "true",
        SHUFFLE_PARTITIONS: "200",
    }


def test_the_cores_and_the_launch_setting_cap_the_partitions() -> None:
    local = ExpressionEvaluation(
        session(2, {}, {SHUFFLE_PARTITIONS: "4"}), True, adaptive_fixed=False
    )
    assert local.settings_for(45_000) == {ADAPTIVE: "false", SHUFFLE_PARTITIONS: "2"}
    one = ExpressionEvaluation(
        session(8, {}, {SHUFFLE_PARTITIONS: "3"}), True, adaptive_fixed=False
    )
    assert one.settings_for(45_000)[SHUFFLE_PARTITIONS] == "3"
    # a launch value that is not a number (a platform's "auto"): the cores cap alone
    auto = ExpressionEvaluation(
        session(2, {}, {SHUFFLE_PARTITIONS: "auto"}), True, adaptive_fixed=False
    )
    assert auto.settings_for(45_000)[SHUFFLE_PARTITIONS] == "2"
