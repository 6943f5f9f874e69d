"""Small construct helpers shared by the NEFF-like layouts.

* :class:`StrictEnum` maps an integer field to a :class:`enum.IntEnum` member and
  refuses unknown codes (construct's own ``Enum`` returns unknown values as
  plain integers, which would let a bad code through silently).
* :func:`field_offsets` lists the byte offset and size of every top-level field
  of a fixed-size ``Struct``, so errors can name the byte offset of a field and
  tests can patch a single field.
* :func:`explain_construct_error` turns a ``construct.ConstructError`` into the
  field name, byte offset and a short reason, for one-line errors.
"""

from __future__ import annotations

from enum import IntEnum

import construct as cs


class StrictEnum(cs.Adapter):
    """An integer field decoded to ``enum_cls``; unknown codes are a ``MappingError``.

    ``zero_is_none=True`` decodes 0 as ``None`` (and builds ``None`` as 0): used for
    the ``alu_op`` field, which is 0 for ALL_GATHER.
    """

    def __init__(self, subcon: cs.Construct, enum_cls: type[IntEnum], *,
                 zero_is_none: bool = False):
        super().__init__(subcon)
        self.enum_cls = enum_cls
        self.zero_is_none = zero_is_none

    def _decode(self, obj, context, path):
        if obj == 0 and self.zero_is_none:
            return None
        try:
            return self.enum_cls(obj)
        except ValueError:
            raise cs.MappingError(
                f"unknown {self.enum_cls.__name__} code 0x{obj:x}", path=path) from None

    def _encode(self, obj, context, path):
        if obj is None:
            if self.zero_is_none:
                return 0
            raise cs.MappingError(f"{self.enum_cls.__name__} value required", path=path)
        try:
            return int(self.enum_cls(obj))
        except ValueError:
            raise cs.MappingError(
                f"unknown {self.enum_cls.__name__} code {obj!r}", path=path) from None


def zero_bytes(n: int) -> cs.Const:
    """Reserved bytes: built as zeros, and parsing fails unless they are all zero."""
    return cs.Const(bytes(n))


def field_offsets(struct: cs.Struct) -> dict[str, tuple[int, int]]:
    """``{name: (offset, size)}`` of every named top-level field of a fixed-size struct."""
    out: dict[str, tuple[int, int]] = {}
    pos = 0
    for sub in struct.subcons:
        size = sub.sizeof()
        if sub.name:
            out[sub.name] = (pos, size)
        pos += size
    return out


def _last_field(err: cs.ConstructError, offsets: dict[str, tuple[int, int]]) -> str | None:
    path = getattr(err, "path", None) or ""
    parts = [p.strip() for p in path.split("->")]
    for part in reversed(parts):
        if part in offsets:
            return part
    return None


def explain_construct_error(err: cs.ConstructError, struct: cs.Struct,
                            data: bytes) -> tuple[str | None, int | None, str]:
    """Return ``(field, offset_in_record, why)`` for a failed ``struct.parse(data)``."""
    offsets = field_offsets(struct)
    name = _last_field(err, offsets)
    off = offsets[name][0] if name else None
    if isinstance(err, cs.ConstError):
        why = "reserved bytes must be zero"
        if name is not None:
            start, size = offsets[name]
            chunk = bytes(data[start:start + size])
            nz = next((i for i, b in enumerate(chunk) if b), None)
            if nz is not None:
                off = start + nz
                why = (f"reserved bytes must be zero (byte {start + nz} of the record is "
                       f"0x{chunk[nz]:02x})")
        return name, off, why
    if isinstance(err, cs.MappingError):
        msg = str(err).splitlines()[-1]
        return name, off, msg
    if isinstance(err, cs.StreamError):
        return name, off, "record truncated"
    return name, off, str(err).splitlines()[-1]


def patch_field(record: bytes, struct: cs.Struct, name: str, value: int | bytes) -> bytes:
    """Return ``record`` with field ``name`` overwritten (little-endian int or raw bytes).

    No validation: this is the escape hatch used to build deliberately invalid
    records (assembler ``patch:`` keys, tests).
    """
    offsets = field_offsets(struct)
    if name not in offsets:
        raise KeyError(name)
    start, size = offsets[name]
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
        if len(raw) != size:
            raise ValueError(f"{name} takes {size} bytes, not {len(raw)}")
    else:
        raw = int(value).to_bytes(size, "little", signed=int(value) < 0)
    return bytes(record[:start]) + raw + bytes(record[start + size:])
