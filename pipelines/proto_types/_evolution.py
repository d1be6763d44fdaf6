"""Schema evolution of a silver table: may the rows of a new schema land in the old table?

Rule: a new schema may add fields, at any depth (inside structs, array elements, map values);
nothing else may change. Fields are matched by name the way Spark and Delta do, ignoring case.

- a field only in ``new`` is appended (after the existing ones, in ``new``'s order);
- a field only in ``old`` stays (rows of the new schema hold null there; a protobuf field
  may be deleted compatibly);
- a field in both keeps the old name, position and metadata (comment), its type merged by
  the same rule; it is nullable when either side is;
- a leaf type that differs (``int`` vs ``bigint`` too: Delta cannot widen column types
  without its type-widening table feature), a struct meeting a non-struct, a map key that
  differs, or a name differing only in case is a conflict.
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType


class _ConflictError(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def schemas_compatible(old: StructType, new: StructType) -> tuple[StructType | None, str | None]:
    """Merge ``new`` into ``old`` if ``new`` only adds fields.

    Returns:
        (merged schema, None) when compatible (the merged schema equals ``old`` when
        ``new`` adds nothing), else (None, reason) naming the first conflicting column path,
        e.g. ``"column `order.items.element.qty`: existing int, new bigint"``.
    """
    try:
        merged = _merge_struct(old, new, "")
    except _ConflictError as conflict:
        return None, f"column `{conflict.path}`: {conflict.reason}"
    return merged, None


def _merge_struct(old: StructType, new: StructType, prefix: str) -> StructType:
    new_by_name = {f.name.lower(): f for f in new.fields}
    old_names = {f.name.lower() for f in old.fields}
    fields: list[StructField] = []
    for field in old.fields:
        other = new_by_name.get(field.name.lower())
        if other is None:
            fields.append(field)
            continue
        path = prefix + field.name
        if other.name != field.name:
            raise _ConflictError(path, f"renamed to `{prefix}{other.name}` (only the case differs)")
        merged = _merge_type(field.dataType, other.dataType, path)
        fields.append(
            StructField(
                field.name, merged, field.nullable or other.nullable, metadata=field.metadata
            )
        )
    fields.extend(f for f in new.fields if f.name.lower() not in old_names)
    return StructType(fields)


def _merge_type(old: DataType, new: DataType, path: str) -> DataType:
    if isinstance(old, StructType) and isinstance(new, StructType):
        return _merge_struct(old, new, path + ".")
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        element = _merge_type(old.elementType, new.elementType, path + ".element")
        return ArrayType(element, old.containsNull or new.containsNull)
    if isinstance(old, MapType) and isinstance(new, MapType):
        if old.keyType != new.keyType:
            raise _ConflictError(
                path + ".key",
                f"existing {old.keyType.simpleString()}, new {new.keyType.simpleString()}",
            )
        value = _merge_type(old.valueType, new.valueType, path + ".value")
        return MapType(old.keyType, value, old.valueContainsNull or new.valueContainsNull)
    if old != new:
        raise _ConflictError(path, f"existing {old.simpleString()}, new {new.simpleString()}")
    return old
