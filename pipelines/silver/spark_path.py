"""Steps 4 to 6 of a silver micro-batch on the Spark path: what ``driver_pass.SmallBatch``
does in the driver for a small batch, done by Spark over the framed batch.

:class:`LargeBatch` and ``SmallBatch`` answer the same questions, so ``batch.SilverBatch``
runs one sequence of steps on either: the quarantine rows of step 4 (bad frames, failed
resolutions), each version decoded (step 5, ``decode_pass.decode_all``, kept computed), a
table's schema conflicts and decode failures, and the rows quality rejected (step 6), each
quarantine part a DataFrame (``rejects``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame

from codec import SchemaKey

from .decode import DecodeSpec
from .decode_pass import DecodedVersion, decode_all
from .framing import FramedBatch, Heads
from .plan import TablePlan
from .rejects import (
    quarantine_bad_frames,
    quarantine_conflicts,
    quarantine_decode_failures,
    quarantine_dq,
    quarantine_faults,
    quarantine_time,
)
from .resolution import KeyCounts, Resolution


@dataclass(frozen=True)
class LargeBatch:
    """A batch on the Spark path after step 1.

    Attributes:
        framed: the framed batch (``framing.FramedBatch``).
        counts: its records per schema key.
        keep: how a decode pass is kept computed (every outcome reads it).
        count_failures: whether ``keep`` runs a pass, so that the pass counts each version's
            failures as it is computed (``decode_pass.decode_all``).
    """

    framed: FramedBatch
    counts: KeyCounts
    keep: Callable[[DataFrame], DataFrame]
    count_failures: bool

    @property
    def heads(self) -> Heads:
        return self.framed.heads

    def rejects(
        self, bad_frames: bool, faults: list[Resolution], quarantined_at: datetime
    ) -> list[DataFrame]:
        """Step 4's quarantine rows: the bad frames (when the counts found some), then the
        records of failed resolutions (the framed batch planned only for them)."""
        q_time = quarantine_time(quarantined_at)
        out = [quarantine_bad_frames(self.framed.framed, q_time)] if bad_frames else []
        if faults:
            out.append(quarantine_faults(self.framed.framed, faults, q_time))
        return out

    def decode(self, specs: Mapping[SchemaKey, DecodeSpec]) -> dict[SchemaKey, DecodedVersion]:
        """Each version's records decoded (several in one pass), each pass kept."""
        return decode_all(self.framed, specs, keep=self.keep, count_failures=self.count_failures)

    def conflicts(self, plan: TablePlan, quarantined_at: datetime) -> list[DataFrame]:
        """The records of ``plan``'s conflicting versions, as quarantine rows."""
        return quarantine_conflicts(self.framed.framed, plan, quarantine_time(quarantined_at))

    def decode_failures(
        self, decoded: DecodedVersion, res: Resolution, message_type: str, quarantined_at: datetime
    ) -> DataFrame:
        """The records of one version that did not decode, as quarantine rows."""
        q_time = quarantine_time(quarantined_at)
        return quarantine_decode_failures(decoded.rows, res, message_type, q_time)

    def quality_failures(
        self, failed: DataFrame, plan: TablePlan, quarantined_at: datetime, rows: int | None
    ) -> DataFrame:
        """The rows of ``plan``'s table a quality rule rejected (``rows`` of them, when
        known), with their raw bytes from the framed batch."""
        q_time = quarantine_time(quarantined_at)
        return quarantine_dq(failed, self.framed.framed, plan, q_time, rows)
