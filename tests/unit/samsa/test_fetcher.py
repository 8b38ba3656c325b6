"""The consumer's fetch side without sockets: record decoding (checked against
protocol.records), positions as records are handed out, control and aborted batches, CRCs,
every codec, and fetch responses applied to the partition states."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.errors import CorruptMessageError, OffsetOutOfRangeError
from protocol.messages.fetch_response import AbortedTransaction, PartitionData
from protocol.records import (
    ControlRecordType,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    encode_control_record,
)
from samsa._cluster import Cluster
from samsa._decoding import CompletedFetch, Decoders, decode_records, parse_batches
from samsa._fetcher import Fetcher
from samsa._positions import PartitionState, SubscriptionState
from samsa.config import parse_config
from samsa.types import ConsumerRecord, TopicPartition

TP = TopicPartition("t", 0)
CONFIG = parse_config("consumer", {})


def records(first: int, count: int, *, value_size: int = 10, key: bytes | None = None,
            timestamp: int = 1_700_000_000_000) -> list[Record]:
    return [Record(offset=first + i, timestamp=timestamp + i, key=key,
                   value=bytes([i % 256]) * value_size) for i in range(count)]


def completed(data: bytes, *, aborted: list[tuple[int, int]] | None = None,
              epoch: int = 0) -> CompletedFetch:
    view = memoryview(data)
    return CompletedFetch(TP, epoch, view, parse_batches(view), aborted)


def take_all(fetch: CompletedFetch, state: PartitionState, *, step: int = 1000,
             config: dict[str, object] | None = None) -> list[ConsumerRecord]:
    decoders = Decoders({**CONFIG, **(config or {})})
    out: list[ConsumerRecord] = []
    while not fetch.exhausted:
        fetch.take(state, step, decoders, out)
    return out


# --- decoding -----------------------------------------------------------------------------

header_strategy = st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=300)))
record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=20_000)),
    st.lists(header_strategy, max_size=3),
    st.integers(-(2**40), 2**40),
    st.integers(1, 20_000),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=30), st.integers(0, 2**40),
       st.sampled_from(list(CompressionType)))
def test_records_decode_as_protocol_records_decodes_them(
        specs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int, int]],
        base_offset: int, codec: CompressionType) -> None:
    offset, written = base_offset, []
    for key, value, headers, timestamp_delta, gap in specs:
        written.append(Record(offset=offset, timestamp=1_600_000_000_000 + timestamp_delta,
                              key=key, value=value, headers=tuple(headers)))
        offset += gap
    data = encode_batch(written, compression=codec)
    fetch = completed(data)
    got = take_all(fetch, PartitionState(position=base_offset, fetch_offset=base_offset), step=7)
    expected = decode_batch(data).records
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]
    assert all(type(r) is ConsumerRecord and r.topic == "t" for r in got)
    assert [r.serialized_value_size for r in got] == [
        -1 if r.value is None else len(r.value) for r in expected]


def test_decode_skips_records_below_the_position() -> None:
    data = encode_batch(records(100, 10))
    got = decode_records(data[61:], 10, topic="t", partition=0, base_offset=100,
                         base_timestamp=1_700_000_000_000, log_append_time=None, leader_epoch=3,
                         min_offset=105)
    assert [r.offset for r in got] == [105, 106, 107, 108, 109]
    assert got[0].leader_epoch == 3 and got[0].timestamp_type == 0


def test_log_append_time_batches_give_every_record_the_batch_time() -> None:
    data = encode_batch(records(0, 3), timestamp_type=TimestampType.LOG_APPEND_TIME,
                        max_timestamp=42)
    got = take_all(completed(data), PartitionState(position=0, fetch_offset=0))
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(42, 1)] * 3


def test_deserializers_apply_to_keys_and_values() -> None:
    data = encode_batch(records(0, 2, key=b"k"))
    got = take_all(completed(data), PartitionState(position=0, fetch_offset=0),
                   config={"key.deserializer": bytes.decode, "value.deserializer": len})
    assert [(r.key, r.value, r.serialized_value_size) for r in got] == [("k", 10, 10)] * 2


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_truncated_record_is_corrupt(cut: int) -> None:
    payload = encode_batch(records(0, 2, value_size=30))[61:]
    with pytest.raises(CorruptMessageError):
        decode_records(payload[:-cut], 2, topic="t", partition=0, base_offset=0,
                       base_timestamp=0, log_append_time=None, leader_epoch=-1, min_offset=0)


def test_a_crc_mismatch_is_corrupt_unless_check_crcs_is_off() -> None:
    data = bytearray(encode_batch(records(0, 3)))
    data[-2] ^= 0xFF  # a byte of the last value
    with pytest.raises(CorruptMessageError, match="CRC"):
        take_all(completed(bytes(data)), PartitionState(position=0, fetch_offset=0))
    got = take_all(completed(bytes(data)), PartitionState(position=0, fetch_offset=0),
                   config={"check.crcs": False})
    assert len(got) == 3


# --- batches and positions ------------------------------------------------------------------


def test_parse_batches_leaves_out_a_partial_last_batch() -> None:
    first, second = encode_batch(records(0, 5)), encode_batch(records(5, 5))
    batches = parse_batches(memoryview(first + second[:-3]))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 4)]
    assert parse_batches(memoryview(first[:40])) == []


def test_take_hands_out_records_in_chunks_and_advances_the_position() -> None:
    data = encode_batch(records(0, 5)) + encode_batch(records(5, 5))
    fetch = completed(data)
    state = PartitionState(position=3, fetch_offset=fetch.next_fetch_offset)
    decoders = Decoders(CONFIG)
    out: list[ConsumerRecord] = []
    fetch.take(state, 4, decoders, out)
    assert [r.offset for r in out] == [3, 4, 5, 6] and state.position == 7
    fetch.take(state, 100, decoders, out)
    assert [r.offset for r in out][4:] == [7, 8, 9] and state.position == 10
    assert fetch.exhausted and fetch.next_fetch_offset == 10


def test_position_moves_past_a_compacted_tail_and_control_batches() -> None:
    # a batch whose last offsets were compacted away: last_offset_delta says 0..9
    compacted = encode_batch(records(0, 3), last_offset_delta=9)
    marker = encode_batch([encode_control_record(ControlRecordType.COMMIT, coordinator_epoch=0,
                                                 offset=10, timestamp=0)],
                          is_control=True, is_transactional=True, producer_id=7,
                          producer_epoch=0)
    state = PartitionState(position=0, fetch_offset=0)
    got = take_all(completed(compacted + marker), state)
    assert [r.offset for r in got] == [0, 1, 2]
    assert state.position == 11


def transactional(first: int, count: int, producer_id: int) -> bytes:
    return encode_batch(records(first, count), is_transactional=True, producer_id=producer_id,
                        producer_epoch=0, base_sequence=0)


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return encode_batch([encode_control_record(kind, coordinator_epoch=0, offset=offset,
                                               timestamp=0)],
                        is_control=True, is_transactional=True, producer_id=producer_id,
                        producer_epoch=0)


def test_read_committed_skips_aborted_transactions() -> None:
    data = (transactional(0, 3, producer_id=1)          # aborted
            + transactional(3, 2, producer_id=2)        # committed
            + marker(5, 1, ControlRecordType.ABORT)
            + marker(6, 2, ControlRecordType.COMMIT)
            + transactional(7, 2, producer_id=1))       # producer 1 again, not aborted
    state = PartitionState(position=0, fetch_offset=0)
    got = take_all(completed(data, aborted=[(1, 0)]), state,
                   config={"isolation.level": "read_committed"})
    assert [r.offset for r in got] == [3, 4, 7, 8]
    assert state.position == 9
    everything = take_all(completed(data, aborted=[(1, 0)]),
                          PartitionState(position=0, fetch_offset=0))
    assert [r.offset for r in everything] == [0, 1, 2, 3, 4, 7, 8]


# --- partition states -----------------------------------------------------------------------


def test_seek_moves_the_position_and_drops_what_is_buffered() -> None:
    state = PartitionState(position=5, fetch_offset=50)
    state.buffered.append(completed(encode_batch(records(5, 3))))
    epoch = state.epoch
    state.seek(2)
    assert (state.position, state.fetch_offset, len(state.buffered)) == (2, 2, 0)
    assert state.epoch == epoch + 1
    state.request_reset("earliest")
    assert state.position is None and state.reset_strategy == "earliest"


def test_reassignment_keeps_the_state_of_partitions_kept() -> None:
    subscriptions = SubscriptionState("latest")
    subscriptions.assign_manually([TopicPartition("t", 0), TopicPartition("t", 1)])
    subscriptions.state(TopicPartition("t", 0)).seek(7)
    subscriptions.set_assignment([TopicPartition("t", 0), TopicPartition("t", 2)])
    assert subscriptions.positions() == {TopicPartition("t", 0): (7, -1)}
    assert subscriptions.missing_positions() == [TopicPartition("t", 2)]
    with pytest.raises(ValueError, match="t-1 is not assigned"):
        subscriptions.state(TopicPartition("t", 1))


# --- fetch responses applied ----------------------------------------------------------------


def fetcher(reset: str = "earliest") -> tuple[Fetcher, SubscriptionState, asyncio.Event]:
    config = parse_config("consumer", {"auto.offset.reset": reset})
    subscriptions = SubscriptionState(reset)
    ready = asyncio.Event()
    return Fetcher(Cluster(config), subscriptions, config, ready), subscriptions, ready


def test_a_response_for_an_older_epoch_is_dropped() -> None:
    fetch, subscriptions, ready = fetcher()
    subscriptions.assign_manually([TP])
    state = subscriptions.state(TP)
    state.seek(0)
    epoch = state.epoch
    state.seek(0)  # a seek after the request went out
    fetch._complete(TP, epoch, PartitionData(records=encode_batch(records(0, 3))))
    assert not state.buffered and not ready.is_set()
    fetch._complete(TP, state.epoch, PartitionData(records=encode_batch(records(0, 3)),
                                                   high_watermark=3))
    assert len(state.buffered) == 1 and state.fetch_offset == 3 and ready.is_set()
    assert [r.offset for r in fetch.take_records(10)] == [0, 1, 2]
    assert state.position == 3 and not state.buffered and state.high_watermark == 3


def test_offset_out_of_range_resets_or_raises_with_reset_none() -> None:
    fetch, subscriptions, _ = fetcher("earliest")
    subscriptions.assign_manually([TP])
    subscriptions.state(TP).seek(99)
    fetch._complete(TP, subscriptions.state(TP).epoch,
                    PartitionData(error_code=OffsetOutOfRangeError.code))
    assert subscriptions.awaiting_reset() == [TP]

    fetch, subscriptions, _ = fetcher("none")
    subscriptions.assign_manually([TP])
    subscriptions.state(TP).seek(99)
    fetch._complete(TP, subscriptions.state(TP).epoch,
                    PartitionData(error_code=OffsetOutOfRangeError.code))
    with pytest.raises(OffsetOutOfRangeError, match="99"):
        fetch.take_records(10)
    assert subscriptions.state(TP).position == 99


def test_take_records_takes_partitions_in_turn_and_skips_paused_ones() -> None:
    fetch, subscriptions, _ = fetcher()
    first, second = TopicPartition("t", 0), TopicPartition("t", 1)
    subscriptions.assign_manually([first, second])
    for tp in (first, second):
        state = subscriptions.state(tp)
        state.seek(0)
        fetch._complete(tp, state.epoch, PartitionData(records=encode_batch(records(0, 4))))
    subscriptions.state(second).paused = True
    assert {r.partition for r in fetch.take_records(10)} == {0}
    subscriptions.state(second).paused = False
    assert [r.partition for r in fetch.take_records(10)] == [1] * 4


def test_aborted_transactions_of_the_response_reach_the_completed_fetch() -> None:
    fetch, subscriptions, _ = fetcher()
    subscriptions.assign_manually([TP])
    state = subscriptions.state(TP)
    state.seek(0)
    fetch._decoders.read_committed = True
    data = transactional(0, 2, producer_id=4) + marker(2, 4, ControlRecordType.ABORT)
    fetch._complete(TP, state.epoch, PartitionData(
        records=data, aborted_transactions=[AbortedTransaction(producer_id=4, first_offset=0)]))
    assert fetch.take_records(10) == []
    assert state.position == 3


def test_a_batch_that_fails_to_decode_fails_again_until_seeked_past() -> None:
    data = encode_batch(records(0, 2)) + encode_batch(records(2, 2))
    fetch = completed(data)
    state = PartitionState(position=0, fetch_offset=4)

    def refuse_offset_two(value: bytes | None) -> bytes | None:
        if value == bytes([0]) * 10 and state.position == 2:
            raise ValueError("cannot deserialize")
        return value

    decoders = Decoders({**CONFIG, "value.deserializer": refuse_offset_two})
    out: list[ConsumerRecord] = []
    fetch.take(state, 10, decoders, out)  # the second batch fails: the first is handed out
    assert [r.offset for r in out] == [0, 1]
    for _ in range(2):
        with pytest.raises(ValueError, match="cannot deserialize"):
            fetch.take(state, 10, decoders, [])
        assert state.position == 2 and not fetch.exhausted


def test_decoded_records_are_real_frozen_consumer_records() -> None:
    data = encode_batch([Record(offset=5, timestamp=9, key=b"k", value=b"v",
                                headers=(("h", b"x"),))], partition_leader_epoch=2)
    (record,) = take_all(completed(data), PartitionState(position=0, fetch_offset=0))
    assert record == ConsumerRecord("t", 0, 5, 9, 0, b"k", b"v", (("h", b"x"),), 2, 1, 1)
    assert hash(record) == hash(ConsumerRecord("t", 0, 5, 9, 0, b"k", b"v", (("h", b"x"),),
                                               2, 1, 1))
    with pytest.raises(AttributeError):
        record.offset = 6  # type: ignore[misc]
