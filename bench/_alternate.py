"""Two ways of running the same work, alternated in one Spark session (the benches that
compare a way with its baseline in the same run): a warm-up run of each (the JVM's JIT
compiler is busy for minutes after a start), then ``repeat`` runs of each, each way first in
turn, each into a lakehouse of its own."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def alternate(
    run: Callable[[str, bool], Sequence[Any]], work: Path, repeat: int
) -> dict[bool, list[Sequence[Any]]]:
    """The runs of each way (False: the baseline), ``run(lakehouse path, way)`` giving a
    run's figures."""
    for way in (False, True):  # warm-up of both
        run(str(work / f"warm-up-{way}"), way)
    figures: dict[bool, list[Sequence[Any]]] = {False: [], True: []}
    for rep in range(repeat):
        for way in (rep % 2 == 1, rep % 2 == 0):  # each way first in turn
            figures[way].append(run(str(work / f"run-{rep}-{way}"), way))
    return figures


def medians(figures: dict[bool, list[Sequence[Any]]], count: int) -> dict[bool, list[float]]:
    """Per way, the median of each of the runs' first ``count`` figures."""
    return {
        way: [statistics.median(r[i] for r in runs) for i in range(count)]
        for way, runs in figures.items()
    }
