"""``__transaction_state`` record bytes, built by hand from Kafka's schemas, field by field.

The expected bytes follow Kafka's ``TransactionLogKey`` (v0) and ``TransactionLogValue``
(v0, and v1, the first flexible version) as
``transaction-coordinator/src/main/resources/common/message/`` defines them (Samsa's copies:
``protocol/schemas/transaction-coordinator/``), and ``TransactionLog.keyToBytes`` /
``valueToBytes``: an int16 version, then the fields in schema order. The broker writes v0
(transaction.version 0) and reads v0 and v1. Beside the GroupMetadata goldens of
``test_group_records.py``.
"""

from __future__ import annotations

import struct

from broker.transaction.metadata import TransactionMetadata, TransactionState, TxnTransit
from broker.transaction.state_log import (
    decode_transaction_record,
    transaction_log_key,
    transaction_log_value,
)
from protocol.messages.transaction_coordinator.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)

PRODUCER_ID = 0x0102030405060708  # every byte differs: a swapped or short field shows
START_MS = 1_700_000_000_000
UPDATE_MS = 1_700_000_000_123
PARTITIONS = frozenset({("events", 2), ("audit", 5), ("events", 0)})


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(text: str) -> bytes:
    """A v0 (non-compact) string: int16 length in bytes, then UTF-8."""
    data = text.encode()
    return int16(len(data)) + data


def transit(state: TransactionState, *, start_timestamp_ms: int = START_MS) -> TxnTransit:
    """A transition to ``state``: the partitions of ``PARTITIONS`` unless Empty or Dead."""
    in_transaction = state not in (TransactionState.EMPTY, TransactionState.DEAD)
    return TxnTransit(
        producer_id=PRODUCER_ID,
        previous_producer_id=-1,
        producer_epoch=7,
        last_producer_epoch=-1,
        timeout_ms=60_000,
        state=state,
        partitions=PARTITIONS if in_transaction else frozenset(),
        start_timestamp_ms=start_timestamp_ms,
        last_update_timestamp_ms=UPDATE_MS,
    )


def loaded(
    state: TransactionState,
    *,
    producer_epoch: int = 7,
    previous_producer_id: int = -1,
    start_timestamp_ms: int = START_MS,
) -> tuple[str, TransactionMetadata]:
    """What ``decode_transaction_record`` should give for transactional id "t"."""
    return "t", TransactionMetadata(
        "t",
        producer_id=PRODUCER_ID,
        previous_producer_id=previous_producer_id,
        producer_epoch=producer_epoch,
        timeout_ms=60_000,
        state=state,
        partitions=set(PARTITIONS) if state is not TransactionState.EMPTY else set(),
        start_timestamp_ms=start_timestamp_ms,
        last_update_timestamp_ms=UPDATE_MS,
    )


# ---- key ---------------------------------------------------------------------------


def test_key_bytes() -> None:
    expected = (
        int16(0)  # key version 0
        + string("txn-ä")  # TransactionalId: "ä" is two bytes of UTF-8, so the length is 6
    )
    assert expected == b"\x00\x00" + b"\x00\x06txn-\xc3\xa4"
    assert transaction_log_key("txn-ä") == expected


# ---- value v0: what the broker writes ------------------------------------------------


V0_ONGOING = (
    int16(0)  # value version 0
    + int64(PRODUCER_ID)  # ProducerId
    + int16(7)  # ProducerEpoch
    + int32(60_000)  # TransactionTimeoutMs
    + struct.pack(">b", 1)  # TransactionStatus: Ongoing
    + int32(2)  # TransactionPartitions: int32 count (nullable array), one entry per topic
    + string("audit")  # [0].Topic
    + int32(1)  # [0].PartitionIds: int32 count
    + int32(5)
    + string("events")  # [1].Topic
    + int32(2)  # [1].PartitionIds
    + int32(0)
    + int32(2)
    + int64(UPDATE_MS)  # TransactionLastUpdateTimestampMs
    + int64(START_MS)  # TransactionStartTimestampMs
)


def test_value_v0_bytes_of_an_ongoing_transaction() -> None:
    assert transaction_log_value(transit(TransactionState.ONGOING)) == V0_ONGOING
    assert len(V0_ONGOING) == 2 + 8 + 2 + 4 + 1 + 4 + (7 + 4 + 4) + (8 + 4 + 8) + 8 + 8


def test_value_v0_of_an_ongoing_transaction_decodes_back() -> None:
    # The previous producer id is not in v0: Kafka reads it as -1 too.
    decoded = decode_transaction_record(transaction_log_key("t"), V0_ONGOING)
    assert decoded == loaded(TransactionState.ONGOING)


V0_EMPTY = (
    int16(0)  # value version 0
    + int64(PRODUCER_ID)  # ProducerId
    + int16(7)  # ProducerEpoch
    + int32(60_000)  # TransactionTimeoutMs
    + struct.pack(">b", 0)  # TransactionStatus: Empty
    + int32(-1)  # TransactionPartitions: null (Kafka writes null in state Empty)
    + int64(UPDATE_MS)  # TransactionLastUpdateTimestampMs
    + int64(-1)  # TransactionStartTimestampMs: no transaction started
)


def test_value_v0_bytes_of_an_empty_transaction_have_null_partitions() -> None:
    assert transaction_log_value(transit(TransactionState.EMPTY, start_timestamp_ms=-1)) == V0_EMPTY
    decoded = decode_transaction_record(transaction_log_key("t"), V0_EMPTY)
    assert decoded == loaded(TransactionState.EMPTY, start_timestamp_ms=-1)


def test_a_dead_transaction_is_a_tombstone() -> None:
    assert transaction_log_value(transit(TransactionState.DEAD)) is None
    assert decode_transaction_record(transaction_log_key("t"), None) == ("t", None)


# ---- value v1 (flexible): written by Kafka with transaction.version >= 1, read here ---------


V1_PREPARE_COMMIT = (
    int16(1)  # value version 1
    + int64(PRODUCER_ID)  # ProducerId
    + int16(8)  # ProducerEpoch
    + int32(60_000)  # TransactionTimeoutMs
    + struct.pack(">b", 2)  # TransactionStatus: PrepareCommit
    + b"\x03"  # TransactionPartitions: compact array, unsigned varint count + 1 = 2 + 1
    + b"\x06audit"  # [0].Topic: compact string, varint length + 1 = 6
    + b"\x02"  # [0].PartitionIds: compact array of 1
    + int32(5)
    + b"\x00"  # [0]: no tagged fields
    + b"\x07events"  # [1].Topic
    + b"\x03"  # [1].PartitionIds: compact array of 2
    + int32(0)
    + int32(2)
    + b"\x00"  # [1]: no tagged fields
    + int64(UPDATE_MS)  # TransactionLastUpdateTimestampMs
    + int64(START_MS)  # TransactionStartTimestampMs
    + b"\x03"  # tagged fields: 3, in tag order
    + b"\x00\x08"  # tag 0 PreviousProducerId, 8 bytes
    + int64(PRODUCER_ID - 1)
    + b"\x01\x08"  # tag 1 NextProducerId, 8 bytes
    + int64(PRODUCER_ID + 1)
    + b"\x02\x02"  # tag 2 ClientTransactionVersion, 2 bytes
    + int16(2)
)


def test_value_v1_bytes_from_the_codec() -> None:
    value = TransactionLogValue(
        producer_id=PRODUCER_ID,
        previous_producer_id=PRODUCER_ID - 1,
        next_producer_id=PRODUCER_ID + 1,
        producer_epoch=8,
        transaction_timeout_ms=60_000,
        transaction_status=2,
        transaction_partitions=[
            PartitionsSchema(topic="audit", partition_ids=[5]),
            PartitionsSchema(topic="events", partition_ids=[0, 2]),
        ],
        transaction_last_update_timestamp_ms=UPDATE_MS,
        transaction_start_timestamp_ms=START_MS,
        client_transaction_version=2,
    )
    assert int16(1) + value.encode(1) == V1_PREPARE_COMMIT
    assert TransactionLogValue.decode(V1_PREPARE_COMMIT[2:], 1) == value


def test_value_v1_decodes_into_the_broker_state_with_its_tagged_fields() -> None:
    decoded = decode_transaction_record(transaction_log_key("t"), V1_PREPARE_COMMIT)
    assert decoded == loaded(
        TransactionState.PREPARE_COMMIT, producer_epoch=8, previous_producer_id=PRODUCER_ID - 1
    )


def test_value_v1_of_an_empty_transaction_without_tagged_fields() -> None:
    expected = (
        int16(1)  # value version 1
        + V0_EMPTY[
            2:17
        ]  # ProducerId (8), ProducerEpoch (2), TransactionTimeoutMs (4), TransactionStatus (1)
        + b"\x00"  # TransactionPartitions: null (compact: varint 0)
        + V0_EMPTY[21:]  # after v0's int32 null count: the two timestamps
        + b"\x00"  # no tagged fields: every one at its default (-1, -1, 0)
    )
    value = TransactionLogValue(
        producer_id=PRODUCER_ID,
        producer_epoch=7,
        transaction_timeout_ms=60_000,
        transaction_status=0,
        transaction_partitions=None,
        transaction_last_update_timestamp_ms=UPDATE_MS,
        transaction_start_timestamp_ms=-1,
    )
    assert int16(1) + value.encode(1) == expected
    decoded = decode_transaction_record(transaction_log_key("t"), expected)
    assert decoded == loaded(TransactionState.EMPTY, start_timestamp_ms=-1)
