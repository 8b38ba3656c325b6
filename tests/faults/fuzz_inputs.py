"""The protocol fuzzer's inputs, sans-IO: base requests per (API, version) and their mutations.

Everything here is a pure function of a ``random.Random``: case ``i`` of seed ``s`` is drawn
from ``random.Random(f"{s}:{i}")`` alone, so any case can be rebuilt from its seed and number
(``fuzz --replay`` replays saved bytes instead, which needs no schema at all).

Wire layout the mutators rely on (Kafka's request framing, ``protocol.frames``):
``int32 size`` then the request header, whose first 8 bytes are always ``int16 api_key``,
``int16 api_version``, ``int32 correlation_id`` (header v0-v2 alike), then the body.

Bases, for one (API key, version) the broker advertises:

- ``valid``: the hand-made valid request of ``tests.integration.valid_requests`` (a few APIs);
- ``default``: the message class with every field at its default;
- ``drawn``: every field the version has drawn at random from the schema (integers at their
  edges or anywhere, null where nullable, long and non-ASCII strings, zero to
  ``MAX_ARRAY`` elements, unknown tagged fields in flexible versions), then, half the time,
  aimed at the run's topic and group, and tamed like ``test_every_version`` (no unbounded
  long polls, no huge partition counts) so that an unmutated request is answered at once.

A :class:`Case` is what one connection does: frames sent back to back (possibly several:
pipelining), how (whole, cut and stalled, reset right after) and what is expected. Mutations of
the frame bytes (:data:`MUTATORS`): bit flips, truncation, trailing garbage, "interesting"
integers (edges, huge or negative lengths, huge varints) written at random offsets — which is
how length fields get huge and negative values without knowing where they are —, random
bodies, random frames, wrong API versions, unknown API keys, wrong correlation ids, size
prefixes that lie (negative, huge, above ``socket.request.max.bytes``), a big garbage frame.
"""

from __future__ import annotations

import functools
import random
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from protocol import codegen
from protocol.frames import encode_request
from protocol.messages import REQUESTS
from protocol.messages.request_header import RequestHeader
from protocol.records import Record, encode_batch
from tests.message_strategies import INT_RANGES, classes_of, spec_for

__all__ = [
    "MUTATORS",
    "Case",
    "Scene",
    "base_frame",
    "draw_case",
    "draw_message",
]

MAX_ARRAY = 3
CAP_MS = 100
CAP_PARTITIONS = 4
DELETE_TOPICS = 20
PRODUCE = 0
FIXED_TIMESTAMP_MS = 1_767_225_600_000
HEADER = struct.Struct(">ihhi")  # size prefix, api_key, api_version, correlation_id
BIG_FRAME_BYTES = 1 << 20
DEFAULT_MAX_REQUEST_BYTES = 104857600  # Kafka's socket.request.max.bytes default
TOPIC_NAME_FIELDS = ("name", "topic", "topic_name")
# Values a length or count field gets wrong in every way: edges, negative, huge, off by one.
INTERESTING = {
    1: [0x00, 0x01, 0x7F, 0x80, 0xFF],
    2: [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE],
    4: [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x00100000, 0x7FFFFFF0],
    8: [0, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF],
}
HUGE_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff",
                b"\x80\x80\x80\x80\x08", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]


@dataclass(frozen=True)
class Scene:
    """What the broker has for aimed requests: a topic (two partitions) and a group."""

    topic: str
    topic_id: uuid.UUID
    group: str


@dataclass(frozen=True)
class Case:
    """One connection's input. ``mode``: ``whole`` (send, read the answers), ``stall`` (send the
    first ``cut`` bytes, keep the connection silent ``stall_s``, then close), ``reset`` (send,
    then reset the connection at once, reading nothing)."""

    number: int
    api_key: int
    api_version: int
    mutator: str
    base: str
    frames: tuple[bytes, ...]
    mode: str = "whole"
    cut: int = 0
    stall_s: float = 0.0

    @property
    def data(self) -> bytes:
        return b"".join(self.frames)

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "api_key": self.api_key, "api_version": self.api_version,
                "mutator": self.mutator, "base": self.base, "mode": self.mode, "cut": self.cut,
                "stall_s": self.stall_s, "frames": [frame.hex() for frame in self.frames]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(data["number"], data["api_key"], data["api_version"], data["mutator"],
                   data["base"], tuple(bytes.fromhex(frame) for frame in data["frames"]),
                   data["mode"], data["cut"], data["stall_s"])


# -- drawing messages from the schema -----------------------------------------------------------


def draw_message(rng: random.Random, api_key: int, version: int) -> Any:
    """A request of ``api_key`` valid for ``version``, every present field drawn."""
    spec = spec_for(api_key, "request")
    return _draw_struct(rng, classes_of(spec), codegen.layout_of(spec.struct, version, spec))


def _draw_struct(rng: random.Random, classes: dict[str, type], layout: codegen.StructLayout) -> Any:
    message = classes[layout.struct.name]()
    for fl in layout.fields:
        if fl.mode != "absent":
            setattr(message, fl.spec.attr, _draw_field(rng, classes, fl))
    if layout.flexible and rng.random() < 0.2:
        known = {f.tag for f in layout.struct.fields if f.tag is not None}
        tag = max(known, default=-1) + 1 + rng.randrange(20)
        message.unknown_tagged_fields = [(tag, rng.randbytes(rng.randrange(6)))]
    return message


def _draw_field(rng: random.Random, classes: dict[str, type], fl: codegen.FieldLayout) -> Any:
    if fl.nullable and rng.random() < 0.1:
        return None
    if fl.spec.is_array:
        count = rng.randrange(MAX_ARRAY + 1)
        if fl.child is not None:
            return [_draw_struct(rng, classes, fl.child) for _ in range(count)]
        return [_draw_scalar(rng, fl.spec.element) for _ in range(count)]
    if fl.child is not None:
        return _draw_struct(rng, classes, fl.child)
    return _draw_scalar(rng, fl.spec.type)


def _draw_scalar(rng: random.Random, kind: str) -> Any:
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        edges = [low, high, max(low, -1), 0, 1]
        return rng.choice(edges) if rng.random() < 0.4 else rng.randint(low, high)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.uniform(-1e9, 1e9)
    if kind == "uuid":
        return uuid.UUID(int=0) if rng.random() < 0.3 else uuid.UUID(int=rng.getrandbits(128))
    length = rng.choice([0, 1, 5, 8, 130, 300])
    if kind == "string":
        return "ä" * (length // 2) if rng.random() < 0.3 else rng.randbytes(length).hex()[:length]
    return rng.randbytes(length)  # bytes, records


def aim(message: Any, scene: Scene) -> None:
    """Name the scene's topic and group wherever ``message`` names a topic or a group."""
    if isinstance(message, list):
        for element in message:
            aim(element, scene)
        return
    if not is_dataclass(message):
        return
    for each in fields(message):
        value = getattr(message, each.name)
        if each.name in TOPIC_NAME_FIELDS and isinstance(value, str):
            setattr(message, each.name, scene.topic)
        elif each.name == "topic_id" and isinstance(value, uuid.UUID):
            setattr(message, each.name, scene.topic_id)
        elif each.name == "group_id" and isinstance(value, str):
            setattr(message, each.name, scene.group)
        elif isinstance(value, list) or is_dataclass(value):
            aim(value, scene)


def tame(api_key: int, request: Any) -> Any:
    """Keep an unmutated drawn request answerable at once and cheap (``test_every_version``)."""
    if api_key == 0 and getattr(request, "acks", 1) == 0:
        request.acks = 1
    if hasattr(request, "max_wait_ms"):
        request.max_wait_ms = min(request.max_wait_ms, CAP_MS)
    if hasattr(request, "timeout_ms"):
        request.timeout_ms = min(request.timeout_ms, CAP_MS)
    if hasattr(request, "rebalance_timeout_ms"):
        request.rebalance_timeout_ms = min(request.rebalance_timeout_ms, CAP_MS)
    if hasattr(request, "session_timeout_ms"):
        request.session_timeout_ms = min(request.session_timeout_ms, CAP_MS)
    for topic in getattr(request, "topics", None) or ():
        for name in ("num_partitions", "count"):
            if isinstance(getattr(topic, name, None), int):
                setattr(topic, name, min(getattr(topic, name), CAP_PARTITIONS))
    return request


# -- base frames --------------------------------------------------------------------------------

ValidBuild = Callable[[Any, int], Any]


def base_frame(rng: random.Random, api_key: int, version: int, scene: Scene,
               valid: dict[int, ValidBuild], correlation_id: int) -> tuple[str, bytes]:
    """A well-formed request frame of (``api_key``, ``version``) and the name of its base."""
    kinds = ["default", "drawn", "drawn"] + (["valid", "valid"] if api_key in valid else [])
    kind = rng.choice(kinds)
    if kind == "valid":
        message = valid[api_key](_valid_scene(scene), version)
        if api_key == PRODUCE:  # its batch is stamped with the time: a fixed one, for replay
            message.topic_data[0].partition_data[0].records = encode_batch(
                [Record(offset=0, timestamp=FIXED_TIMESTAMP_MS, key=b"k", value=b"v")])
    elif kind == "default":
        message = REQUESTS[api_key]()
    else:
        message = draw_message(rng, api_key, version)
        if rng.random() < 0.5 and api_key != DELETE_TOPICS:
            aim(message, scene)
        tame(api_key, message)
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=rng.choice(["fuzz", None, ""]))
    try:
        return kind, encode_request(header, message)
    except Exception:  # a drawn value the encoder refuses at this version: the defaults
        return "default", encode_request(header, REQUESTS[api_key]())


def _valid_scene(scene: Scene) -> Any:
    from tests.integration.valid_requests import Scene as ValidScene

    return ValidScene(topic=scene.topic, topic_id=scene.topic_id, group=scene.group)


# -- mutators: frame bytes in, frame bytes out --------------------------------------------------


def _resize(frame: bytearray) -> bytes:
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def bit_flip(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        position = rng.randrange(8, len(out)) if len(out) > 8 else rng.randrange(4, len(out))
        out[position] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(rng: random.Random, frame: bytes) -> bytes:
    return _resize(bytearray(frame[: rng.randrange(4, len(frame))]))


def trailing_garbage(rng: random.Random, frame: bytes) -> bytes:
    return _resize(bytearray(frame + rng.randbytes(rng.choice([1, 2, 7, 100]))))


def interesting_value(rng: random.Random, frame: bytes) -> bytes:
    """An edge, huge or negative integer (or a huge varint) over the bytes at a random offset
    of the header's tail or the body: how a length or count field goes wrong."""
    out = bytearray(frame)
    for _ in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.25:
            value = rng.choice(HUGE_VARINTS)
        else:
            width = rng.choice([1, 2, 4, 4, 8])
            value = rng.choice(INTERESTING[width]).to_bytes(width, "big")
        start = rng.randrange(8, max(9, len(out)))
        out[start : start + len(value)] = value
    return _resize(out)


def random_body(rng: random.Random, frame: bytes) -> bytes:
    """The header's api key and version kept, everything after them random."""
    return _resize(bytearray(frame[:8] + rng.randbytes(rng.choice([0, 1, 4, 16, 64, 512]))))


def random_frame(rng: random.Random, frame: bytes) -> bytes:
    return _resize(bytearray(4) + rng.randbytes(rng.choice([0, 1, 3, 8, 40, 400])))


def wrong_version(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    version = rng.choice([-1, -32768, 32767, 100, rng.randrange(-5, 30)])
    struct.pack_into(">h", out, 6, version)
    return bytes(out)


def unknown_api(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    struct.pack_into(">h", out, 4, rng.choice([-1, -32768, 32767, 99, 999, 10099]))
    return bytes(out)


def wrong_correlation_id(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    struct.pack_into(">i", out, 8, rng.choice([-1, 0, -(2**31), 2**31 - 1]))
    return bytes(out)


def lying_size(rng: random.Random, frame: bytes) -> bytes:
    """A size prefix that is negative, zero, huge, above ``socket.request.max.bytes`` or a few
    bytes off the truth (then the next frame's bytes are read as this one's)."""
    size = rng.choice([-1, -(2**31), 0, 1, 3, 2**31 - 1, DEFAULT_MAX_REQUEST_BYTES + 1,
                       len(frame) - 4 - rng.randrange(1, 4), len(frame) - 4 + rng.randrange(1, 4)])
    return struct.pack(">i", size) + frame[4:]


def big_frame(rng: random.Random, frame: bytes) -> bytes:
    """A real frame of about a MiB: the header kept, the body garbage (allocation, not parse)."""
    return _resize(bytearray(frame[:8] + rng.randbytes(64) * (BIG_FRAME_BYTES // 64)))


Mutator = Callable[[random.Random, bytes], bytes]
MUTATORS: dict[str, Mutator] = {
    "bit_flip": bit_flip,
    "truncate": truncate,
    "trailing_garbage": trailing_garbage,
    "interesting_value": interesting_value,
    "random_body": random_body,
    "random_frame": random_frame,
    "wrong_version": wrong_version,
    "unknown_api": unknown_api,
    "wrong_correlation_id": wrong_correlation_id,
    "lying_size": lying_size,
    "big_frame": big_frame,
}
WEIGHTS = {"bit_flip": 6, "truncate": 3, "trailing_garbage": 2, "interesting_value": 6,
           "random_body": 2, "random_frame": 1, "wrong_version": 2, "unknown_api": 1,
           "wrong_correlation_id": 1, "lying_size": 2, "big_frame": 0.2}
# How a case uses its connection: weights of whole / pipelined / stalled / reset.
MODES: dict[str, float] = {"whole": 10, "pipeline": 2, "stall": 1, "reset": 1, "valid": 1}


# -- a case -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The (API key, version) pairs one listener advertises."""

    pairs: tuple[tuple[int, int], ...]
    valid: dict[int, ValidBuild] = field(default_factory=dict, hash=False, compare=False)


@functools.cache
def round_robin(pairs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``pairs`` in the order cases take them: every API's newest version first, then every
    API's next newest, ...: a short run still reaches every API."""
    newest_first = sorted(pairs, key=lambda pair: (pair[0], -pair[1]))
    rank = {pair: index - next(i for i, p in enumerate(newest_first) if p[0] == pair[0])
            for index, pair in enumerate(newest_first)}
    return tuple(sorted(pairs, key=lambda pair: (rank[pair], pair[0])))


def case_rng(seed: int, number: int) -> random.Random:
    return random.Random(f"{seed}:{number}")


def draw_case(seed: int, number: int, target: Target, scene: Scene, *,
              turn: int | None = None) -> Case:
    """Case ``number`` of ``seed``: the pair is taken round-robin by ``turn`` (``number`` by
    default: every advertised pair in every pass), the rest is drawn from the case's own
    random stream."""
    rng = case_rng(seed, number)
    order = round_robin(target.pairs)
    api_key, version = order[(number if turn is None else turn) % len(order)]
    mode = _pick(rng, MODES)
    count = rng.randrange(2, 60) if mode == "pipeline" else 1
    frames, mutators, bases = [], [], []
    for index in range(count):
        if index:  # a pipeline mixes pairs and keeps some frames valid
            api_key_i, version_i = rng.choice(target.pairs)
        else:
            api_key_i, version_i = api_key, version
        base, frame = base_frame(rng, api_key_i, version_i, scene, target.valid, number * 100 + index)
        name = "none" if mode == "valid" or (index and rng.random() < 0.5) else _pick(rng, WEIGHTS)
        frames.append(frame if name == "none" else MUTATORS[name](rng, frame))
        mutators.append(name)
        bases.append(base)
    case = Case(number, api_key, version, mutators[0] if count == 1 else "pipeline:" +
                ",".join(sorted(set(mutators))), bases[0], tuple(frames),
                "whole" if mode in ("pipeline", "valid") else mode)
    if mode == "stall":
        data_length = len(case.data)
        case = replace(case, cut=rng.randrange(1, data_length) if data_length > 1 else 0,
                       stall_s=rng.choice([0.05, 0.2, 0.5, 1.0]))
    return case


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]
