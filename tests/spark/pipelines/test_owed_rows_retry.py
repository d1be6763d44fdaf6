"""A retried batch's owed rows (``pipelines.silver.retried``) land even when an earlier attempt
of the same batch committed owed rows of its own to the table and this attempt's append loses
a race: each attempt's commit has an app id of its own, so the earlier one is not taken for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.delta import read_batch_marker
from pipelines.silver import retried
from tests.support.delta_log import commit_actions


class ConcurrentAppendException(Exception):  # noqa: N818 - the name Delta gives it
    """Named as Delta's: ``is_delta_conflict`` reads it as a lost race, to be retried."""


def test_owed_rows_land_though_an_earlier_attempt_owed_the_same_batch(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    path = str(tmp_path / "t")
    retried._owe(spark.range(0, 2), path, "app-1", 7, False)  # the second attempt's owed rows
    real_save = DataFrameWriter.save
    races: list[int] = []

    def lose_the_first_race(self: Any, *args: Any, **kwargs: Any) -> None:
        if not races:
            races.append(1)
            raise ConcurrentAppendException("lost the race: nothing landed")
        real_save(self, *args, **kwargs)

    monkeypatch.setattr(DataFrameWriter, "save", lose_the_first_race)
    retried._owe(spark.range(2, 5), path, "app-1", 7, False)  # the third attempt's
    assert races == [1]
    ids = sorted(r[0] for r in spark.read.format("delta").load(path).collect())
    assert ids == [0, 1, 2, 3, 4]
    apps = [read_batch_marker(c["commitInfo"]["userMetadata"]) for c in commit_actions(Path(path))]
    assert [(app.rsplit("/", 1)[0], batch) for app, batch in apps] == [("app-1/retry", 7)] * 2
    assert apps[0][0] != apps[1][0]
