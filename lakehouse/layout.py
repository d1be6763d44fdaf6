"""Every path of the lakehouse, spelled once.

A lakehouse is one root (a local folder, ``file://...``, or an object-store URI such as
``s3a://bucket/prefix``) with one folder per layer::

    <root>/bronze/<table>                  raw Kafka records, one Delta table per topic (or one)
    <root>/silver/<table>                  one Delta table per message type
    <root>/quarantine/records              every record that could not land in silver
    <root>/quality/results                 quality results (Delta)
    <root>/quality/docs                    Great Expectations' Data Docs (built there for a local
                                           root; built in a local folder and published there
                                           for an object-store root)
    <root>/_checkpoints/<job>/<name>       a streaming query's checkpoint
    <root>/_checkpoints/<job>/<name>/_protolake_app_id   its idempotent-write app id
    <root>/_checkpoints/<job>/<name>/_protolake_running  locked while a process runs it (local)
    <root>/_writers/<name>                 a writer lease (object-store roots: lakehouse.lease)

A table's name is its folder name under its layer. Every module asks :class:`Layout` for a
path; none builds one with string formatting of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BRONZE = "bronze"
SILVER = "silver"
QUARANTINE = "quarantine"
QUALITY = "quality"
LAYERS = (BRONZE, SILVER, QUARANTINE, QUALITY)
QUARANTINE_TABLE = "records"
QUALITY_RESULTS_TABLE = "results"
CHECKPOINTS = "_checkpoints"
APP_ID_FILE = "_protolake_app_id"
RUNNING_FILE = "_protolake_running"
WRITERS = "_writers"
DOCS = "docs"


def has_scheme(path: str) -> bool:
    """True for a URI with a scheme (``s3a://...``, ``file:///...``), false for a plain path."""
    return "://" in path


@dataclass(frozen=True)
class Layout:
    """The paths of one lakehouse, from its root.

    ``root`` keeps its scheme; a trailing ``/`` is dropped, so ``Layout("lh/")`` and
    ``Layout("lh")`` name the same paths.
    """

    root: str

    def __post_init__(self) -> None:
        if not self.root or not self.root.strip():
            raise ValueError("the lakehouse path is empty")
        stripped = self.root.rstrip("/")
        if has_scheme(self.root) and not self.root.split("://", 1)[1].strip("/"):  # "s3a://"
            raise ValueError(f"the lakehouse path {self.root!r} names no bucket or folder")
        object.__setattr__(self, "root", stripped or "/")

    # -- layers and tables -------------------------------------------------------------
    def layer(self, name: str) -> str:
        """The folder of one layer (``bronze``, ``silver``, ``quarantine``, ``quality``)."""
        if name not in LAYERS:
            raise ValueError(f"unknown lakehouse layer {name!r} (one of {', '.join(LAYERS)})")
        return f"{self.root}/{name}"

    @property
    def bronze(self) -> str:
        return self.layer(BRONZE)

    @property
    def silver(self) -> str:
        return self.layer(SILVER)

    def bronze_table(self, table: str) -> str:
        """One bronze table's folder."""
        return f"{self.bronze}/{_segment(table)}"

    def silver_table(self, table: str) -> str:
        """One silver table's folder."""
        return f"{self.silver}/{_segment(table)}"

    @property
    def quarantine(self) -> str:
        """The quarantine Delta table."""
        return f"{self.layer(QUARANTINE)}/{QUARANTINE_TABLE}"

    @property
    def quality_results(self) -> str:
        """The quality results Delta table."""
        return f"{self.layer(QUALITY)}/{QUALITY_RESULTS_TABLE}"

    @property
    def quality_docs(self) -> str:
        """The Data Docs folder (for an object-store root: where they are published)."""
        return f"{self.layer(QUALITY)}/{DOCS}"

    # -- streaming state ---------------------------------------------------------------
    @property
    def checkpoints(self) -> str:
        """The folder holding every streaming checkpoint, one folder per job."""
        return f"{self.root}/{CHECKPOINTS}"

    def checkpoint(self, job: str, name: str) -> str:
        """A streaming query's checkpoint: ``_checkpoints/<job>/<name>``."""
        return f"{self.checkpoints}/{_segment(job)}/{_segment(name)}"

    def writer_lease(self, name: str) -> str:
        """The writer lease of the tables one job writes (``bronze``, ``silver``)."""
        return f"{self.root}/{WRITERS}/{_segment(name)}"

    @staticmethod
    def app_id_file(checkpoint: str) -> str:
        """The file that keeps a checkpoint's idempotent-write app id."""
        return f"{checkpoint.rstrip('/')}/{APP_ID_FILE}"

    @staticmethod
    def running_file(checkpoint: str) -> str:
        """The file locked while a process runs a local checkpoint's query
        (:mod:`lakehouse.checkpoint_guard`)."""
        return f"{checkpoint.rstrip('/')}/{RUNNING_FILE}"

    @staticmethod
    def query_metadata(checkpoint: str) -> str:
        """Spark's file of a checkpoint's query id (``metadata``: ``{"id": "<uuid>"}``),
        written when a query first starts on it."""
        return f"{checkpoint.rstrip('/')}/metadata"

    @staticmethod
    def offset_log(checkpoint: str) -> str:
        """Spark's offset log of a checkpoint: ``offsets/<batch id>``, written as a batch is
        planned."""
        return f"{checkpoint.rstrip('/')}/offsets"

    @staticmethod
    def commit_log(checkpoint: str) -> str:
        """Spark's commit log of a checkpoint: ``commits/<batch id>``, written once a batch
        is done."""
        return f"{checkpoint.rstrip('/')}/commits"

    @staticmethod
    def initial_offsets(checkpoint: str) -> str:
        """Where a checkpoint keeps its one source's starting offsets: ``sources/0/0``,
        written as the query plans its first batch."""
        return f"{checkpoint.rstrip('/')}/sources/0/0"

    # -- local folders -----------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        """True when the root is a folder of this machine (a plain path or a ``file:`` URI of
        this host: :func:`local_path`)."""
        return local_path(self.root) is not None

    def local_root(self) -> Path:
        """The root as an absolute local folder (``~`` expanded, symbolic links resolved).

        Raises:
            ValueError: the root is on another file system (``s3a://``, ``abfss://``, ...).
        """
        local = local_path(self.root)
        if local is None:
            raise ValueError(f"the lakehouse {self.root} is not a local folder")
        return local

    def local_quality_dir(self) -> Path:
        """Great Expectations' project folder (its context and Data Docs) for a local root."""
        return self.local_root() / QUALITY

    def local_quality_docs(self) -> Path:
        """Where Data Docs are built for a local root."""
        return self.local_quality_dir() / DOCS


def local_path(path: str) -> Path | None:
    """A plain path or ``file:`` URI as an absolute, resolved local path (symbolic links and
    ``..`` undone: one folder has one local path, whatever spelled it); None for any other
    scheme, or a ``file:`` URI of another host.

    The rest of a ``file:`` URI is taken literally, as Hadoop's ``Path`` takes it (Spark writes
    ``file:///a/x%20y`` to a folder named ``x%20y``, and ``#`` or ``?`` are part of the name).
    """
    if path.startswith("file:"):
        rest = path[len("file:") :]
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                return None
            rest = f"/{tail}"
        return Path(rest).resolve()
    if has_scheme(path):
        return None
    return Path(path).expanduser().resolve()


def location_key(path: str) -> str:
    """One spelling per folder, to compare or key locations by: a local one's resolved path
    (``/x``, ``file:/x`` and ``file:///x`` alike), else the URI without a trailing ``/``."""
    local = local_path(path)
    return str(local) if local is not None else path.rstrip("/")


def table_name(path: str) -> str:
    """A table's name: the last folder of its path (``.../silver/shop_order_1a2b`` -> that)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def _segment(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a table or checkpoint name (one folder, no '/')")
    return name
