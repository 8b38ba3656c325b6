"""Hypothesis strategies for every Kafka message, built from the message schemas.

``message_strategy(spec, version)`` draws an instance of the generated class of
``spec`` (``protocol.messages``) that is valid for ``version``: every field the
version has is drawn, the others keep their defaults, so ``encode(version)``
accepts it. The values are well-formed on the wire, not meaningful: a drawn request
is one a broker must parse, not one it must accept. They cover what the wire format
distinguishes:

- integers at their edges (minimum, maximum, -1, 0, 1) as well as anywhere between;
- ``None`` wherever the version makes a field nullable (strings, bytes, records,
  arrays, structs);
- strings with non-ASCII text, and strings and byte strings longer than 127 bytes
  (a two-byte compact length); arrays of zero to ``MAX_ARRAY`` elements (each
  element costs hypothesis time in every test that draws the message);
- in flexible versions, unknown tagged fields (or none) on every struct, with tags that
  are not the struct's known tags, ascending as a decoder reads them back.

``full=True`` instead draws every value non-null, non-empty and different from its
default (unknown tagged fields included), so every tagged field is written.

Strategies are built once per message and wire layout (``codegen.layout_of``) and cached.
``load_specs()`` is the schema model of the vendored schemas (``protocol/schemas/kafka``,
or ``$SAMSA_KAFKA_SCHEMAS``) plus Samsa's own; it raises if there are none, so a test
that uses it fails rather than shrinks when the schemas are missing.
``spec_for(api_key, kind)`` picks one API's request or response.
"""

from __future__ import annotations

import functools
import importlib
import uuid
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from protocol import codegen

__all__ = ["classes_of", "load_specs", "message_strategy", "spec_for"]

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
MAX_ARRAY = 2
MAX_TAG = 2**31 - 1  # Kafka reads a tag as a Java int


@functools.cache
def load_specs() -> list[codegen.MessageSpec]:
    """Every message spec: Kafka's (vendored, or ``$SAMSA_KAFKA_SCHEMAS``) and Samsa's."""
    root = codegen.schema_dir(None)
    if not root.is_dir() or not any(root.glob("*.json")):
        raise FileNotFoundError(f"no Kafka message schemas at {root}")
    return codegen.load_messages(root)


def spec_for(api_key: int, kind: str = "request") -> codegen.MessageSpec:
    """The spec of API ``api_key``'s ``kind`` (``"request"`` or ``"response"``)."""
    if kind not in ("request", "response"):
        raise ValueError(f"kind must be 'request' or 'response', not {kind!r}")
    for spec in load_specs():
        if spec.kind == kind and spec.api_key == api_key:
            return spec
    raise KeyError(f"no {kind} schema for API key {api_key}")


def classes_of(spec: codegen.MessageSpec) -> dict[str, type]:
    """The generated class of each struct of ``spec``, by struct name."""
    module = importlib.import_module(f"protocol.messages.{spec.module}")
    return {struct.name: getattr(module, struct.name) for struct in spec.structs}


def message_strategy(
    spec: codegen.MessageSpec, version: int, *, full: bool = False
) -> SearchStrategy[Any]:
    """Instances of ``spec``'s generated class, valid for ``version`` (see the module doc)."""
    if version not in spec.valid:
        raise ValueError(f"{spec.name} has no version {version}")
    return _builder(spec, full).struct(codegen.layout_of(spec.struct, version, spec))


@functools.cache
def _builder(spec: codegen.MessageSpec, full: bool) -> _Builder:
    return _Builder(spec, full)


class _Builder:
    """The strategies of one message, one per wire layout (``codegen.layout_of``): the
    versions that share a layout share a strategy."""

    def __init__(self, spec: codegen.MessageSpec, full: bool) -> None:
        self.classes = classes_of(spec)
        self.full = full
        self.strategies: dict[codegen.StructLayout, SearchStrategy[Any]] = {}

    def struct(self, layout: codegen.StructLayout) -> SearchStrategy[Any]:
        if layout not in self.strategies:
            cls = self.classes[layout.struct.name]
            defaults = cls()
            fields = {
                fl.spec.attr: self.field(fl, getattr(defaults, fl.spec.attr))
                for fl in layout.fields
                if fl.mode != "absent"
            }
            if layout.flexible:
                fields["unknown_tagged_fields"] = self.unknown_tags(layout.struct)
            self.strategies[layout] = st.builds(cls, **fields)
        return self.strategies[layout]

    def field(self, fl: codegen.FieldLayout, default: Any) -> SearchStrategy[Any]:
        if fl.spec.is_array:
            if fl.child is not None:
                element = self.struct(fl.child)
            else:
                element = self.scalar(fl.spec.element, None)
            value = st.lists(element, min_size=1 if self.full else 0, max_size=MAX_ARRAY)
        elif fl.child is not None:
            value = self.struct(fl.child)
        else:
            value = self.scalar(fl.spec.type, default)
        if fl.nullable and not self.full:
            return st.none() | value
        return value

    def scalar(self, kind: str, default: Any) -> SearchStrategy[Any]:
        """Values of a scalar type; with ``full``, none equal to ``default`` (if given)."""
        value = _SCALARS[kind]
        if not self.full or default is None:
            return value
        other = _other_than(kind, default)
        # A map, not a filter: a filter per field rejects whole examples of wide structs.
        return value.map(lambda drawn: other if drawn == default else drawn)

    def unknown_tags(self, spec: codegen.StructSpec) -> SearchStrategy[Any]:
        known = {field.tag for field in spec.fields if field.tag is not None}
        free = [tag for tag in range(len(known) + 13) if tag not in known]
        tag = st.sampled_from(free) | st.integers(max(known, default=-1) + 1, MAX_TAG)
        fields = st.lists(
            st.tuples(tag, st.binary(max_size=5)), min_size=1, max_size=3, unique_by=_tag_of
        ).map(lambda drawn: sorted(drawn, key=_tag_of))
        return fields if self.full else st.none() | fields


def _tag_of(field: tuple[int, bytes]) -> int:
    return field[0]


def _other_than(kind: str, default: Any) -> Any:
    """A value of ``kind`` that is not ``default``."""
    if kind in INT_RANGES:
        return default + 1 if default < INT_RANGES[kind][1] else default - 1
    if kind == "bool":
        return not default
    if kind == "uuid":
        return uuid.UUID(int=default.int ^ 1)
    return default + {"float64": 1.5, "string": "x"}.get(kind, b"x")


def _integers(kind: str) -> SearchStrategy[int]:
    low, high = INT_RANGES[kind]
    edges = sorted({low, high, max(low, -1), 0, 1})
    return st.sampled_from(edges) | st.integers(low, high)


_LONG = st.integers(128, 300)  # longer than a one-byte compact length can say
_SCALARS: dict[str, SearchStrategy[Any]] = {
    **{kind: _integers(kind) for kind in INT_RANGES},
    "bool": st.booleans(),
    "float64": st.floats(allow_nan=False),
    "uuid": st.just(uuid.UUID(int=0)) | st.uuids(),
    "string": st.text(max_size=8) | _LONG.map(lambda n: "ä" * (n // 2)),
    "bytes": st.binary(max_size=8) | _LONG.map(bytes),
    "records": st.binary(max_size=8) | _LONG.map(bytes),
}
