"""The client side of per-key reads (samsa._keys): the records of one key found in fetched
batches equal a decode-everything-and-compare oracle, whatever the keys, values and codecs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.records import BATCH_HEADER_SIZE, Record, encode_batch, encode_varint
from samsa._decoding import Decoders, decode_records
from samsa._keys import _records_of_key, _records_with_key
from samsa.types import TopicPartition

KEYS = [b"", b"k", b"key-1", b"key-10", b"x" * 70, b"y" * 200]  # 1- and 2-byte key lengths
key_or_null = st.one_of(st.none(), st.sampled_from(KEYS))
# Values often hold a key's encoding, so a search hit inside a value is exercised.
values = st.one_of(st.none(), st.binary(max_size=30),
                   st.sampled_from(KEYS).map(lambda key: encode_varint(len(key)) + key + b"!"))
records = st.lists(st.tuples(key_or_null, values), min_size=1, max_size=40)
DECODERS = Decoders({"check.crcs": True, "isolation.level": "read_uncommitted",
                     "key.deserializer": None, "value.deserializer": None})


@given(pairs=records, key=st.sampled_from(KEYS))
def test_records_with_key_equal_the_oracle(pairs: list[tuple[bytes | None, bytes | None]],
                                           key: bytes) -> None:
    batch = encode_batch([Record(i, 1000, k, v) for i, (k, v) in enumerate(pairs)])
    data = batch[BATCH_HEADER_SIZE:]
    found = [decode_records(data[start:end], 1, topic="t", partition=0, base_offset=0,
                            base_timestamp=1000, log_append_time=None, leader_epoch=-1,
                            min_offset=0)[0] for start, end in _records_with_key(data, len(pairs), key)]
    assert [(r.offset, r.key, r.value) for r in found] == [
        (offset, k, v) for offset, (k, v) in enumerate(pairs) if k == key]


@settings(max_examples=50)
@given(batches=st.lists(st.tuples(records, st.sampled_from(
           [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])), min_size=1,
           max_size=4),
       key=st.sampled_from(KEYS), start=st.integers(0, 60))
def test_records_of_key_from_an_offset(batches: list[tuple[list[tuple[bytes | None, bytes | None]],
                                                           CompressionType]],
                                       key: bytes, start: int) -> None:
    data, offset, expected = b"", 0, []
    for pairs, codec in batches:
        batch = [Record(offset + i, 1000 + i, k, v) for i, (k, v) in enumerate(pairs)]
        data += encode_batch(batch, base_offset=offset, compression=codec)
        expected += [(r.offset, r.value) for r in batch if r.key == key and r.offset >= start]
        offset += len(pairs)
    found = _records_of_key(memoryview(data), TopicPartition("t", 0), key, start, DECODERS)
    assert [(r.offset, r.value) for r in found] == expected
    assert all(r.key == key for r in found)
