"""``maintain`` and ``replay`` stop writing once the writer lease they hold is lost: the lease
is looked at before each table's maintenance and before each of replay's writes, and the loss
ends the command instead of one table's failure among others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.lease import WriterLeaseError
from lakehouse.tables import table_version
from pipelines.ops import maintain as maintain_mod


def test_maintain_stops_at_the_table_after_the_loss(spark: Any, tmp_path: Path) -> None:
    silver = tmp_path / "lh" / "silver"
    for name in ("a", "b", "c"):
        for n in (3, 4):  # two appends: an OPTIMIZE has files to compact
            spark.range(n).write.format("delta").mode("append").save(str(silver / name))
    checks: list[int] = []

    def lost_after_the_first_table() -> None:
        checks.append(len(checks))
        if len(checks) > 1:
            raise WriterLeaseError("s3a://b/lh/_writers/silver: lost; this driver stops writing")

    with pytest.raises(WriterLeaseError, match="this driver stops writing"):
        maintain_mod.maintain(
            spark,
            str(tmp_path / "lh"),
            group="silver",
            vacuum=False,
            show_progress=False,
            still_writer=lost_after_the_first_table,
        )
    versions = sorted(table_version(str(silver / n), spark) for n in ("a", "b", "c"))
    assert versions == [1, 1, 2]  # one table optimized (a commit more), the others untouched
