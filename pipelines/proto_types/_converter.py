"""RowConverter: decoded messages of one type -> Arrow record batches matching the Spark schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from pyspark.sql.types import StructType

from codec.gcpause import paused_gc
from pipelines.proto_types._comments import field_comments
from pipelines.proto_types._plan import Planner

_MAX_REASON = 300


class RowConversionError(ValueError):
    """A decoded message could not become a row (e.g. a proto2 string that is not UTF-8).

    Attributes:
        index: position of the first failing message in the list given, or None when no
            single message fails on its own.
        column: the top-level column whose value failed, or None.
        message_type: full name of the message type.
    """

    def __init__(
        self, message_type: str, index: int | None, column: str | None, cause: BaseException
    ) -> None:
        detail = str(cause)
        if len(detail) > _MAX_REASON:
            detail = detail[:_MAX_REASON] + "..."
        where = f"record {index}" if index is not None else "a batch"
        column_text = f", column `{column}`" if column else ""
        super().__init__(
            f"cannot convert {where} of {message_type}{column_text}: "
            f"{type(cause).__name__}: {detail}"
        )
        self.message_type = message_type
        self.index = index
        self.column = column


class RowConverter:
    """Converts messages of one type to rows; build once per (descriptor, max_depth).

    Building walks the descriptor and precomputes one closure per field (see ``_plan``);
    converting is column-wise over a whole list of messages. Converters hold descriptors and
    closures, which do not pickle: build them where they are used (on executors, from the
    FileDescriptorSet bytes), or use :func:`converter_for`, which caches them.

    Args:
        descriptor: the message type; messages passed in must be of this type (any pool).
        max_depth: how many times one message type may nest in itself before the next level
            is kept as JSON text (at least 1).
        file_descriptor_set: the serialized FileDescriptorSet the type came from, compiled
            with source info; its comments become column comments. The upb runtime drops
            comments from descriptors, so without it there are none.
        comments: the same as a mapping of full field/oneof names to comment text (see
            :func:`field_comments`); merged over the ones from ``file_descriptor_set``.
    """

    def __init__(
        self,
        descriptor: Descriptor,
        max_depth: int = 3,
        *,
        file_descriptor_set: bytes | descriptor_pb2.FileDescriptorSet | None = None,
        comments: Mapping[str, str] | None = None,
    ) -> None:
        texts: dict[str, str] = {}
        if file_descriptor_set is not None:
            texts.update(field_comments(file_descriptor_set))
        texts.update(comments or {})
        planner = Planner(max_depth, texts)
        self.descriptor = descriptor
        self.max_depth = max_depth
        self.message_type: str = descriptor.full_name
        self._columns = planner.columns(descriptor, {descriptor.full_name: 1})
        self._extracts = [c.extract for c in self._columns]
        self.spark_schema = StructType([c.spark_field for c in self._columns])
        self.arrow_schema = pa.schema([c.arrow_field for c in self._columns])
        self.column_names: tuple[str, ...] = tuple(c.name for c in self._columns)

    def to_record_batch(self, messages: Iterable[Message]) -> pa.RecordBatch:
        """Convert messages to one record batch with schema :attr:`arrow_schema`.

        Raises:
            TypeError: the first message is not of this converter's type.
            RowConversionError: a message cannot be converted; ``index`` names the first.
        """
        msgs = messages if isinstance(messages, list) else list(messages)
        if msgs and msgs[0].DESCRIPTOR.full_name != self.message_type:
            raise TypeError(
                f"converter for {self.message_type} got a {msgs[0].DESCRIPTOR.full_name}"
            )
        try:
            with paused_gc():
                arrays = [extract(msgs) for extract in self._extracts]
        except Exception as exc:
            raise self._locate(msgs, exc) from exc
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def to_row(self, message: Message) -> tuple[Any, ...]:
        """One message as a tuple in column order (the slow path; for tests and one-offs).

        Values are what pyarrow gives back: int, float, bool, str, bytes, Decimal (uint64),
        datetime in UTC (Timestamp), dict (struct), list (array), list of (key, value)
        tuples (map), None (null); pa.RecordBatch.from_pylist accepts them.
        """
        batch = self.to_record_batch([message])
        return tuple(column[0].as_py() for column in batch.columns)

    def to_dict(self, message: Message) -> dict[str, Any]:
        """One message as a dict of column name to value (see :meth:`to_row`)."""
        return dict(zip(self.column_names, self.to_row(message), strict=True))

    def _locate(self, msgs: list[Message], cause: Exception) -> RowConversionError:
        # Only on failure: convert message by message to name the culprit for quarantine.
        for index, message in enumerate(msgs):
            for column, extract in zip(self._columns, self._extracts, strict=True):
                try:
                    extract([message])
                except Exception as exc:
                    return RowConversionError(self.message_type, index, column.name, exc)
        return RowConversionError(self.message_type, None, None, cause)


@lru_cache(maxsize=256)
def converter_for(
    descriptor: Descriptor, max_depth: int = 3, file_descriptor_set: bytes | None = None
) -> RowConverter:
    """A cached :class:`RowConverter` per (descriptor, max_depth, descriptor set bytes)."""
    return RowConverter(descriptor, max_depth, file_descriptor_set=file_descriptor_set)
