"""The suite's run order (tests/conftest.py) names files that exist: a renamed long file would
otherwise silently lose its place at the front of the parallel run."""

from pathlib import Path

from tests.conftest import LONG_FILES_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_long_file_named_first_exists():
    missing = [name for name in LONG_FILES_FIRST if not (ROOT / name).is_file()]
    assert missing == []


def test_long_files_are_named_once():
    assert len(set(LONG_FILES_FIRST)) == len(LONG_FILES_FIRST)
