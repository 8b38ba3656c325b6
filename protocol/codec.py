"""Runtime support for the generated message codec in ``protocol.messages``.

The generated modules hold flat, per-version encode/decode functions; this module
holds what they share: the ``Message`` base class (the uniform entry points), the
unsigned-varint and tagged-field helpers, and the two error types.

Wire layout (Kafka's, big-endian throughout):

- fixed-size fields are packed back to back with precompiled ``struct.Struct``s;
- non-flexible versions: string = int16 length (-1 = null) + UTF-8; bytes, records
  and arrays = int32 length/count (-1 = null);
- flexible versions: compact string/bytes/records/array = unsigned varint
  (length + 1, 0 = null), and every struct ends with a tagged-field section:
  unsigned varint count, then per field unsigned varint tag, unsigned varint
  size, ``size`` bytes. Tags are written in ascending order.

Invariants:

- Decoding reads a ``memoryview`` with a moving offset. Fixed-size reads go
  through ``struct.unpack_from`` (which checks bounds), every variable-length
  read checks its end against ``len(buffer)`` before slicing, and
  ``Message.decode_from`` is the one place where a short read (``IndexError`` /
  ``struct.error``) or bad UTF-8 becomes ``DecodeError``. Nothing else escapes a
  decode of malformed input.
- A declared array count larger than the bytes left is rejected before any
  element is decoded (as Kafka does), so a hostile count cannot make the decoder
  loop or allocate.
- Unknown tagged fields are kept as ``(tag, bytes)`` pairs in
  ``unknown_tagged_fields`` (``None`` when there are none) and re-emitted, merged
  in tag order with the known ones.

This module is pure: no I/O, no state.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Self
from uuid import UUID

from protocol.errors import InvalidRequestError, UnknownServerError, UnsupportedVersionError

__all__ = [
    "ZERO_UUID",
    "DecodeError",
    "EncodeError",
    "Message",
    "MessageRegistry",
    "Records",
    "UnknownTaggedFields",
    "read_tagged_fields",
    "read_uvarint",
    "write_tagged_fields",
    "write_uvarint",
]

Records = bytes | bytearray | memoryview
"""A record-batch payload: kept opaque; decoded as a zero-copy memoryview slice."""

UnknownTaggedFields = list[tuple[int, bytes]] | None
"""Tagged fields this codec does not know, in the order read; ``None`` if there are none."""

ZERO_UUID = UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``, the default of every uuid field."""


class DecodeError(InvalidRequestError):
    """Malformed input: truncated, a bad length or count, invalid UTF-8, a bad varint.

    The broker answers it with INVALID_REQUEST, as Kafka does for a request it
    cannot parse.
    """


class EncodeError(UnknownServerError):
    """An object could not be encoded (a value out of range for its type, a
    string longer than 32767 bytes, ``None`` in a non-nullable field).

    Always a bug on the encoding side, hence UNKNOWN_SERVER_ERROR.
    """


# ---------------------------------------------------------------- varints


def read_uvarint(buffer: memoryview, offset: int) -> tuple[int, int]:
    """Read an unsigned varint at ``offset``; return ``(value, next_offset)``.

    Unrolled for the 1-3 byte values that lengths of record batches and strings take;
    an index past the end raises IndexError, which ``Message.decode_from`` turns into
    DecodeError.
    """
    byte = buffer[offset]
    if byte < 0x80:
        return byte, offset + 1
    value = byte & 0x7F
    byte = buffer[offset + 1]
    if byte < 0x80:
        return value | byte << 7, offset + 2
    value |= (byte & 0x7F) << 7
    byte = buffer[offset + 2]
    if byte < 0x80:
        return value | byte << 14, offset + 3
    value |= (byte & 0x7F) << 14
    byte = buffer[offset + 3]
    if byte < 0x80:
        return value | byte << 21, offset + 4
    value |= (byte & 0x7F) << 21
    byte = buffer[offset + 4]
    if byte > 0x0F:  # a fifth byte carries the top 4 bits of 32 and nothing else
        raise DecodeError(f"unsigned varint at offset {offset} does not fit 32 bits")
    return value | byte << 28, offset + 5


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**32) as an unsigned varint."""
    if value < 0x80:
        out.append(value)  # ValueError if negative -> EncodeError in Message.encode_into
    elif value < 0x4000:
        out += bytes(((value & 0x7F) | 0x80, value >> 7))
    elif value <= 0xFFFFFFFF:
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    else:
        raise EncodeError(f"{value} does not fit an unsigned varint")


# ---------------------------------------------------------------- tagged fields


def read_tagged_fields(buffer: memoryview, offset: int) -> tuple[UnknownTaggedFields, int]:
    """Read a tagged-field section of a struct that has no known tagged fields."""
    count, offset = read_uvarint(buffer, offset)
    if count == 0:
        return None, offset
    unknown: list[tuple[int, bytes]] = []
    for _ in range(count):
        tag, offset = read_uvarint(buffer, offset)
        size, offset = read_uvarint(buffer, offset)
        end = offset + size
        if end > len(buffer):
            raise truncated(f"tagged field {tag}")
        unknown.append((tag, bytes(buffer[offset:end])))
        offset = end
    return unknown, offset


def write_tagged_fields(
    out: bytearray,
    known: list[tuple[int, bytes | bytearray]] | None,
    unknown: UnknownTaggedFields,
) -> None:
    """Write a tagged-field section: the known fields and the unknown ones, by tag."""
    fields: list[tuple[int, bytes | bytearray]] = list(known) if known else []
    if unknown:
        fields.extend(unknown)
        fields.sort(key=_tag_of)  # stable: an already ordered input keeps its bytes
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def _tag_of(field: tuple[int, bytes | bytearray]) -> int:
    return field[0]


# ---------------------------------------------------------------- errors raised by generated code


def truncated(what: str) -> DecodeError:
    return DecodeError(f"{what}: input is truncated")


def bad_length(what: str, length: int) -> DecodeError:
    return DecodeError(f"{what}: invalid length {length}")


def null_value(what: str) -> DecodeError:
    return DecodeError(f"non-nullable field {what} was serialized as null")


def bad_tag_size(what: str, tag: int) -> DecodeError:
    return DecodeError(f"{what}: tagged field {tag} does not match its declared size")


def non_default(field: str, versions: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"Attempted to write a non-default {field} at version {versions}, which lacks it"
    )


def tags_not_supported(what: str, versions: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"Tagged fields were set in {what}, but version {versions} does not support them"
    )


def string_too_long(what: str) -> EncodeError:
    return EncodeError(f"'{what}' field is too long to be serialized")


# ---------------------------------------------------------------- the uniform entry points

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[bytearray, Any], None]

# What a bad object can make the generated encoders raise; all become EncodeError.
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


class Message:
    """Base of every generated top-level message (requests, responses, headers, records).

    Subclasses are ``@dataclass(slots=True)``; the class attributes below are set
    by the generated module, ``_decoders``/``_encoders`` map each valid version to
    the flat function specialised for it.
    """

    __slots__ = ()

    API_KEY: ClassVar[int] = -1
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_VERSIONS: ClassVar[int | None] = None
    """The first flexible version, or None if no version is flexible."""
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False
    _decoders: ClassVar[Mapping[int, Decoder]] = {}
    _encoders: ClassVar[Mapping[int, Encoder]] = {}

    @classmethod
    def decode(cls, buffer: Records, version: int) -> Self:
        """Decode ``buffer``, which must hold exactly one message of ``version``."""
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        message, end = cls.decode_from(view, 0, version)
        if end != len(view):
            raise DecodeError(f"{cls.__name__} v{version}: {len(view) - end} trailing bytes")
        return message

    @classmethod
    def decode_from(cls, buffer: memoryview, offset: int, version: int) -> tuple[Self, int]:
        """Decode one message starting at ``offset``; return it and the offset after it."""
        decoder = cls._decoders.get(version)
        if decoder is None:
            raise UnsupportedVersionError(f"{cls.__name__} v{version} is not supported")
        try:
            message, end = decoder(buffer, offset)
        except (IndexError, struct.error):
            raise DecodeError(f"{cls.__name__} v{version}: input is truncated") from None
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{cls.__name__} v{version}: invalid UTF-8 in a string") from exc
        return message, end

    def encode(self, version: int) -> bytes:
        """Encode this message at ``version``."""
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append this message, encoded at ``version``, to ``out`` (left as it was on error)."""
        encoder = self._encoders.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{type(self).__name__} v{version} is not supported")
        start = len(out)
        try:
            encoder(out, self)
        except _ENCODE_FAILURES as exc:
            del out[start:]
            raise EncodeError(f"{type(self).__name__} v{version}: {exc}") from exc
        except UnsupportedVersionError:
            del out[start:]
            raise


class MessageRegistry(Mapping[int, type[Message]]):
    """A read-only map of API key (or record type) -> message class that imports each
    generated module on first use.

    Why lazy: building the ~450 slotted dataclasses of every schema costs about half a
    second, and a process needs only the APIs it serves.
    """

    def __init__(self, package: str, entries: Mapping[int, tuple[str, str]]) -> None:
        self._package = package
        self._entries = dict(entries)  # key -> (module, class name)
        self._loaded: dict[int, type[Message]] = {}

    def __getitem__(self, key: int) -> type[Message]:
        loaded = self._loaded.get(key)
        if loaded is None:
            module, name = self._entries[key]
            loaded = getattr(importlib.import_module(f"{self._package}.{module}"), name)
            self._loaded[key] = loaded
        return loaded

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"MessageRegistry({self._package!r}, {len(self)} messages)"
