"""The next fetch offset, from batch headers alone (what lets the reader fetch ahead)."""

from __future__ import annotations

from protocol.records import Record, encode_batch
from pyspark_samsa.fetch import next_fetch_offset


def test_the_offset_after_the_last_whole_batch() -> None:
    first = encode_batch([Record(n, 0, None, b"v") for n in range(5)])
    second = encode_batch([Record(n, 0, None, b"v") for n in range(5, 12)])
    assert next_fetch_offset(b"") is None
    assert next_fetch_offset(first) == 5
    assert next_fetch_offset(first + second) == 12
    assert next_fetch_offset(first + second[:-1]) == 5  # the second is cut short
    assert next_fetch_offset(first[:60]) is None
    # compaction keeps a batch's last offset delta: the next fetch skips what it removed
    compacted = encode_batch([Record(20, 0, None, b"v")], base_offset=20, last_offset_delta=9)
    assert next_fetch_offset(compacted) == 30
