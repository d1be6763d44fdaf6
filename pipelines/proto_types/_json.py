"""JSON text for the values silver keeps as strings (Struct, Value, ListValue, Any, too deep).

The text is protobuf's canonical JSON mapping (https://protobuf.dev/programming-guides/json/)
produced by ``json_format``, with the original field names, compact, non-ASCII kept as is.
When the mapping cannot be produced, nothing is lost: the message is written as
``{"@type": "type.googleapis.com/<full name>", "value": "<base64 of its bytes>"}``, the shape
of an ``Any`` (for an ``Any`` its own type URL and value bytes). That happens for an ``Any``
whose type is not in the descriptor pool (or anywhere inside a message being written) or whose
bytes do not parse as that type, for a ``Value`` holding NaN or an infinity, which JSON
cannot represent, and for a Timestamp or Duration outside its range.
"""

from __future__ import annotations

import base64
import json

from google.protobuf import json_format
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, Message

_ANY = "google.protobuf.Any"
_TYPE_URL_PREFIX = "type.googleapis.com/"


def to_json_text(message: Message, descriptor_pool: DescriptorPool | None = None) -> str:
    """Return ``message`` as compact JSON text (canonical mapping, proto field names).

    Args:
        message: any message, well-known types included.
        descriptor_pool: where an ``Any``'s packed type is looked up; defaults to the pool
            that holds ``message``'s own descriptor.
    """
    pool = descriptor_pool or message.DESCRIPTOR.file.pool
    try:
        obj = json_format.MessageToDict(
            message, preserving_proto_field_name=True, descriptor_pool=pool
        )
    except (json_format.Error, DecodeError, TypeError, ValueError, KeyError):
        # DecodeError: an Any whose bytes do not parse as its type (the codec quarantines
        # such records; a message handed in directly still gets its lossless text)
        obj = _opaque(message)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _opaque(message: Message) -> dict[str, str]:
    """The lossless fallback: type URL and base64 bytes, as an ``Any`` is shaped."""
    if message.DESCRIPTOR.full_name == _ANY:
        type_url: str = message.type_url  # type: ignore[attr-defined]
        value: bytes = message.value  # type: ignore[attr-defined]
    else:
        type_url = _TYPE_URL_PREFIX + message.DESCRIPTOR.full_name
        value = message.SerializeToString(deterministic=True)
    return {"@type": type_url, "value": base64.b64encode(value).decode("ascii")}
