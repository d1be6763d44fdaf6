"""What decoding gives back: `DecodedRecord` (one record), and `message_to_json`, protobuf's
canonical JSON mapping of a decoded message."""

from __future__ import annotations

from typing import Any, NamedTuple

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from .descriptors import ResolvedSchema
from .errors import BadPayload
from .framing import Frame
from .payload import has_unknown_fields
from .walk import child_messages


def message_to_json(message: Message) -> dict[str, Any]:
    """The message in protobuf's canonical JSON mapping, with the .proto field names.

    Raises:
        BadPayload: the message has no canonical JSON: a `google.protobuf.Any` holds a type
            the writer schema does not define (the JSON mapping must fail then), a proto2
            `string` holds bytes that are not UTF-8 (protobuf accepts those in proto2; JSON
            strings cannot carry them), or a value is outside what the mapping can write (a
            Timestamp or Duration out of range, a Value holding NaN or an infinity).
    """
    bad = _first_non_utf8_string(message, "")
    if bad is not None:
        raise BadPayload(
            f"{message.DESCRIPTOR.full_name} has no canonical JSON mapping: string field "
            f"{bad} holds bytes that are not UTF-8",
            message_type=message.DESCRIPTOR.full_name,
        )
    try:
        return json_format.MessageToDict(
            message,
            preserving_proto_field_name=True,
            descriptor_pool=message.DESCRIPTOR.file.pool,  # resolves google.protobuf.Any
        )
    except (json_format.Error, DecodeError, TypeError, KeyError, ValueError) as exc:
        # json_format.Error: a value the mapping cannot write (a Timestamp or Duration out of
        # its range, a Value holding NaN or an infinity); DecodeError: an Any's bytes
        raise BadPayload(
            f"{message.DESCRIPTOR.full_name} has no canonical JSON mapping: {exc}",
            message_type=message.DESCRIPTOR.full_name,
        ) from None


def _first_non_utf8_string(message: Message, prefix: str) -> str | None:
    """The path of the first string field whose value is not UTF-8 (protobuf hands those
    out as bytes), or None."""
    for field, value in message.ListFields():
        path = prefix + field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            try:
                entries = list(value.items())
            except UnicodeDecodeError:  # protobuf cannot hand out a key that is not UTF-8
                return f"{path} (a key)"
            for key, item in entries:
                if key_field.type == field.TYPE_STRING and isinstance(key, bytes):
                    return f"{path} (a key)"
                if value_field.type == field.TYPE_STRING and isinstance(item, bytes):
                    return f"{path}[{key!r}]"
        elif field.type == field.TYPE_STRING:
            if any(isinstance(item, bytes) for item in (value if field.is_repeated else (value,))):
                return path
    for path, child in child_messages(message):
        found = None if child is None else _first_non_utf8_string(child, f"{prefix}{path}.")
        if found is not None:
            return found
    return None


class DecodedRecord(NamedTuple):
    """A decoded record (a named tuple: one is built per record, and tuples build fastest).

    Attributes:
        frame: the framing read from the value or header.
        schema: the compiled writer schema.
        message_type: full name of the message type.
        message: the decoded protobuf message.
    """

    frame: Frame
    schema: ResolvedSchema
    message_type: str
    message: Message

    @property
    def has_unknown_fields(self) -> bool:
        """The message holds fields its writer schema does not define (computed on access;
        only possible with `allow_unknown_fields=True`)."""
        return has_unknown_fields(self.message)

    @property
    def schema_id(self) -> int | None:
        """The schema id the frame named (None for a GUID frame)."""
        return self.frame.schema_id

    @property
    def schema_guid(self) -> str | None:
        """The schema GUID the frame named (None for an id frame)."""
        return self.frame.schema_guid

    @property
    def message_indexes(self) -> tuple[int, ...]:
        """The frame's message indexes."""
        return self.frame.message_indexes

    def to_json(self) -> dict[str, Any]:
        """The message in protobuf's canonical JSON mapping, original field names."""
        return message_to_json(self.message)
