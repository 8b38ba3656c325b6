"""The transaction APIs called directly on a real broker (logs in a temp dir, a manual clock, no
sockets): a transactional producer's whole conversation, what read_committed reads, pending
transactional offsets, fencing, Describe/ListTransactions, WriteTxnMarkers, and a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import (
    RequestContext,
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    find_coordinator,
    init_producer_id,
    list_offsets,
    list_transactions,
    offset_fetch,
    produce,
    txn_offset_commit,
    write_txn_markers,
)
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.group.offsets import OFFSETS_TOPIC, OffsetAndMetadata
from broker.transaction.state_log import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from protocol.messages.end_txn_request import EndTxnRequest
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_transactions_request import ListTransactionsRequest
from protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.request_header import RequestHeader
from protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from protocol.records import Record, encode_batch
from replication.partition import FetchIsolation
from storage.clock import ManualClock
from storage.producer_state import EndMarker
from tests.unit.broker.helpers import create_topic

NOW = 1_700_000_000_000


def make_broker(log_dir: Path, clock: ManualClock) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "3",
                  "transaction.state.log.num.partitions": "3"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    broker.offsets_loader.load_all()
    return broker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    broker = make_broker(tmp_path, clock)
    create_topic(broker, "t", num_partitions=2)
    yield broker
    broker.shutdown()


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, client_id="test")
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="test")


@pytest.fixture
def producer(broker: Broker) -> tuple[int, int]:
    response = init_producer_id.handle(context(broker, 22, 4), InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000))
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


def add_partitions(broker: Broker, pid: int, epoch: int, partitions: list[int], version: int = 3) -> dict[int, int]:
    response = add_partitions_to_txn.handle(context(broker, 24, version), AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=partitions)]))
    return {r.partition_index: r.partition_error_code
            for topic in response.results_by_topic_v3_and_below for r in topic.results_by_partition}


def send(broker: Broker, pid: int, epoch: int, sequence: int, partition: int, values: list[bytes],
         *, version: int = 9, transactional_id: str | None = "tx") -> int:
    records = [Record(i, NOW, None, value) for i, value in enumerate(values)]
    batch = encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                         is_transactional=True)
    response = produce.handle(context(broker, 0, version), ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[
            PartitionProduceData(index=partition, records=batch)])]))
    answer = response.responses[0].partition_responses[0]  # type: ignore[union-attr]
    return answer.error_code


def end(broker: Broker, pid: int, epoch: int, *, commit: bool, version: int = 3) -> int:
    response = end_txn.handle(context(broker, 26, version), EndTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit))
    return response.error_code


def read_values(broker: Broker, partition: int, *, read_committed: bool) -> list[bytes]:
    """What a consumer keeps: read_committed drops the aborted transactions' records."""
    from protocol.records import iter_batches

    part = broker.replica_manager.partition("t", partition)
    assert part is not None
    isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
    fetched = part.read(0, 1 << 20, min_one_message=True, isolation=isolation)
    if fetched is None:
        return []
    aborted = {(a.producer_id, a.first_offset, a.last_offset)
               for a in part.aborted_transactions(0)} if read_committed else set()
    values: list[bytes] = []
    for batch in iter_batches(fetched.read()):
        if batch.is_control:
            continue
        pid, offset = batch.header.producer_id, batch.header.base_offset
        if any(p == pid and first <= offset <= last for p, first, last in aborted):
            continue
        values += [r.value for r in batch.records if r.value is not None]
    return values


def test_find_coordinator_for_a_transactional_id(broker: Broker) -> None:
    response = find_coordinator.handle(context(broker, 10, 4), FindCoordinatorRequest(
        key_type=1, coordinator_keys=["tx"]))
    assert (response.coordinators[0].node_id, response.coordinators[0].error_code) == (broker.node_id, 0)


def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(
    broker: Broker, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    assert broker.replica_manager.topic_by_name(TRANSACTION_STATE_TOPIC) is not None
    assert add_partitions(broker, pid, epoch, [0, 1]) == {0: 0, 1: 0}
    assert send(broker, pid, epoch, 0, 0, [b"c1", b"c2"]) == 0
    assert send(broker, pid, epoch, 0, 1, [b"c3"]) == 0
    partition = broker.replica_manager.partition("t", 0)
    assert partition is not None
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 0)
    assert read_values(broker, 0, read_committed=True) == []
    assert end(broker, pid, epoch, commit=True) == 0
    assert (partition.high_watermark, partition.last_stable_offset) == (3, 3)  # the marker too
    assert add_partitions(broker, pid, epoch, [0]) == {0: 0}
    assert send(broker, pid, epoch, 2, 0, [b"a1"]) == 0
    assert end(broker, pid, epoch, commit=False) == 0
    assert read_values(broker, 0, read_committed=True) == [b"c1", b"c2"]
    assert read_values(broker, 0, read_committed=False) == [b"c1", b"c2", b"a1"]
    assert read_values(broker, 1, read_committed=True) == [b"c3"]
    assert end(broker, pid, epoch, commit=False) == 0  # a retry of the completed abort
    assert end(broker, pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE


def test_produce_needs_the_partition_in_the_transaction(broker: Broker, producer: tuple[int, int]) -> None:
    pid, epoch = producer
    assert send(broker, pid, epoch, 0, 0, [b"x"], version=9) == ErrorCode.INVALID_TXN_STATE
    add_partitions(broker, pid, epoch, [1])
    assert send(broker, pid, epoch, 0, 0, [b"x"], version=11) == ErrorCode.TRANSACTION_ABORTABLE
    assert send(broker, pid, epoch + 1, 0, 1, [b"x"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert send(broker, pid + 1, epoch, 0, 1, [b"x"]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert send(broker, pid, epoch, 0, 1, [b"x"], transactional_id=None) == ErrorCode.INVALID_TXN_STATE
    assert send(broker, pid, epoch, 0, 1, [b"x"]) == 0
    assert send(broker, pid, epoch, 1, 1, [b"y"], transactional_id=None) == 0  # already open


def test_list_offsets_latest_read_committed_is_the_last_stable_offset(
    broker: Broker, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    add_partitions(broker, pid, epoch, [0])
    send(broker, pid, epoch, 0, 0, [b"a", b"b"])

    def latest(isolation_level: int) -> int:
        response = list_offsets.handle(context(broker, 2, 5), ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level, topics=[ListOffsetsTopic(
                name="t", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        return response.topics[0].partitions[0].offset

    assert (latest(0), latest(1)) == (2, 0)
    end(broker, pid, epoch, commit=True)
    assert (latest(0), latest(1)) == (3, 3)


def test_transactional_offsets_are_visible_once_committed(broker: Broker, producer: tuple[int, int]) -> None:
    pid, epoch = producer

    def fetch(require_stable: bool) -> tuple[int, int]:
        response = offset_fetch.handle(context(broker, 9, 7), OffsetFetchRequest(
            group_id="g", require_stable=require_stable,
            topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
        answer = response.topics[0].partitions[0]
        return answer.committed_offset, answer.error_code

    def commit_offset(offset: int, version: int = 3) -> int:
        response = txn_offset_commit.handle(context(broker, 28, version), TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=epoch,
            topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[
                TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]))
        return response.topics[0].partitions[0].error_code

    assert commit_offset(5, version=3) == ErrorCode.INVALID_TXN_STATE  # no AddOffsetsToTxn yet
    assert commit_offset(5, version=4) == ErrorCode.TRANSACTION_ABORTABLE
    added = add_offsets_to_txn.handle(context(broker, 25, 3), AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"))
    assert added.error_code == 0
    assert commit_offset(5) == 0
    assert fetch(False) == (-1, 0)
    assert fetch(True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert end(broker, pid, epoch, commit=True) == 0
    assert fetch(True) == (5, 0)
    add_offsets_to_txn.handle(context(broker, 25, 3), AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"))
    assert commit_offset(9) == 0
    assert end(broker, pid, epoch, commit=False) == 0
    assert fetch(True) == (5, 0)
    offsets_partition = broker.offset_store.partition_for("g")
    log = broker.replica_manager.partition(OFFSETS_TOPIC, offsets_partition)
    assert log is not None and log.last_stable_offset == log.high_watermark


def test_offsets_of_a_transaction_coordinated_by_another_broker_are_not_verified(
        broker: Broker, producer: tuple[int, int]) -> None:
    """A cluster where the group's coordinator is not the transactional id's: without remote
    verification (AddPartitionsToTxn verify_only) the commit goes on, as a transactional
    Produce does; it used to answer NOT_COORDINATOR for ever (kafka-python's
    test_transactional_producer_offsets hung against three nodes)."""
    pid, epoch = producer
    broker.transactions.coordinator.partitions.owns_all = False  # "tx" is coordinated elsewhere
    response = txn_offset_commit.handle(context(broker, 28, 3), TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]))
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(
    broker: Broker, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    add_partitions(broker, pid, epoch, [0])
    send(broker, pid, epoch, 0, 0, [b"zombie"])
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    first = init_producer_id.handle(context(broker, 22, 4), request)
    assert first.error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # its transaction was aborted
    second = init_producer_id.handle(context(broker, 22, 4), request)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, pid, epoch + 2)
    assert read_values(broker, 0, read_committed=True) == []
    assert send(broker, pid, epoch, 1, 0, [b"late"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert end(broker, pid, epoch, commit=True, version=3) == ErrorCode.PRODUCER_FENCED
    assert end(broker, pid, epoch, commit=True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert add_partitions(broker, pid, epoch, [0], version=1) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}


def test_add_partitions_refuses_unknown_and_internal_topics_and_v4_batches(
    broker: Broker, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    response = add_partitions_to_txn.handle(context(broker, 24, 3), AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0, 7]),
                             AddPartitionsToTxnTopic(name=OFFSETS_TOPIC, partitions=[0])]))
    errors = {(t.name, r.partition_index): r.partition_error_code
              for t in response.results_by_topic_v3_and_below for r in t.results_by_partition}
    assert errors == {("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                      ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      (OFFSETS_TOPIC, 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    batched = add_partitions_to_txn.handle(context(broker, 24, 5), AddPartitionsToTxnRequest(
        transactions=[AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=verify,
            topics=[AddPartitionsToTxnTopic(name="t", partitions=[1])]) for verify in (True, False)]))
    codes = [r.topic_results[0].results_by_partition[0].partition_error_code
             for r in batched.results_by_transaction]
    assert codes == [ErrorCode.TRANSACTION_ABORTABLE, 0]


def test_describe_and_list_transactions(broker: Broker, producer: tuple[int, int]) -> None:
    pid, epoch = producer
    add_partitions(broker, pid, epoch, [1, 0])
    described = describe_transactions.handle(context(broker, 65, 0), DescribeTransactionsRequest(
        transactional_ids=["tx", "nope"])).transaction_states
    assert (described[0].transaction_state, described[0].producer_id, described[0].topics[0].partitions) == (
        "Ongoing", pid, [0, 1])
    assert described[1].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = list_transactions.handle(context(broker, 66, 1), ListTransactionsRequest(
        state_filters=["Ongoing", "Bogus"]))
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("tx", "Ongoing")]
    assert listed.unknown_state_filters == ["Bogus"]


def test_write_txn_markers_ends_a_transaction_in_a_partition(broker: Broker, producer: tuple[int, int]) -> None:
    pid, epoch = producer
    add_partitions(broker, pid, epoch, [0])
    send(broker, pid, epoch, 0, 0, [b"x"])
    response = write_txn_markers.handle(context(broker, 27, 1), WriteTxnMarkersRequest(markers=[
        WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=False,
                          coordinator_epoch=0,
                          topics=[WritableTxnMarkerTopic(name="t", partition_indexes=[0, 9])])]))
    errors = [p.error_code for p in response.markers[0].topics[0].partitions]
    assert errors == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    partition = broker.replica_manager.partition("t", 0)
    assert partition is not None and partition.last_stable_offset == partition.high_watermark == 2


def test_a_restart_keeps_transactions_pending_offsets_and_the_lso(
    tmp_path: Path, clock: ManualClock
) -> None:
    broker = make_broker(tmp_path, clock)
    create_topic(broker, "t", num_partitions=2)
    response = init_producer_id.handle(context(broker, 22, 4), InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000))
    pid, epoch = response.producer_id, response.producer_epoch
    add_partitions(broker, pid, epoch, [0])
    send(broker, pid, epoch, 0, 0, [b"open"])
    add_offsets_to_txn.handle(context(broker, 25, 3), AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"))
    txn_offset_commit.handle(context(broker, 28, 3), TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
    broker.shutdown()
    restarted = make_broker(tmp_path, clock)
    try:
        partition = restarted.replica_manager.partition("t", 0)
        assert partition is not None and partition.last_stable_offset == 0
        txn = restarted.transactions.coordinator.transactions["tx"]
        assert (txn.state.display_name, txn.partitions) == (
            "Ongoing", {("t", 0), (OFFSETS_TOPIC, restarted.offset_store.partition_for("g"))})
        assert restarted.offset_store.transactional.has_pending("g", ("t", 0))
        assert send(restarted, pid, epoch, 1, 0, [b"resumed"]) == 0  # the producer goes on
        assert end(restarted, pid, epoch, commit=True) == 0
        assert partition.last_stable_offset == partition.high_watermark
        assert read_values(restarted, 0, read_committed=True) == [b"open", b"resumed"]
        offset = restarted.offset_store.fetch("g", "t", 0)
        assert offset is not None and offset.committed_offset == 1
    finally:
        restarted.shutdown()


def test_a_timed_out_transaction_is_aborted_with_a_fencing_epoch(
    broker: Broker, clock: ManualClock, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    add_partitions(broker, pid, epoch, [0])
    send(broker, pid, epoch, 0, 0, [b"slow"])
    clock.advance(60_001)
    assert broker.transactions.abort_timed_out() == 1
    assert read_values(broker, 0, read_committed=True) == []
    assert send(broker, pid, epoch, 1, 0, [b"late"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert end(broker, pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED


def test_a_reload_replays_transactional_offsets_and_their_markers(
    tmp_path: Path, clock: ManualClock
) -> None:
    broker = make_broker(tmp_path, clock)
    create_topic(broker, "t", num_partitions=2)
    store = broker.offset_store
    markers = broker.transactions.markers
    partition = store.partition_for("g")

    def marker(producer_id: int, commit: bool) -> None:
        error = markers.write_marker((OFFSETS_TOPIC, partition), producer_id, 0,
                                     EndMarker(not commit, 0))
        assert error is ErrorCode.NONE

    store.commit_transactional("g", 1000, 0, {("t", 0): OffsetAndMetadata(10)})
    store.commit_transactional("g", 1001, 0, {("t", 1): OffsetAndMetadata(20)})
    store.commit_transactional("g", 1002, 0, {("t", 0): OffsetAndMetadata(30)})
    marker(1000, commit=True)
    marker(1001, commit=False)
    store.commit("g", {("t", 1): OffsetAndMetadata(5)})  # a plain commit in between
    store.delete_offsets("g", [("t", 0)])  # drops 10, and 30 still pending
    marker(1002, commit=True)
    before = dict(store.group_offsets("g"))
    assert {tp: o.committed_offset for tp, o in before.items()} == {("t", 1): 5}
    broker.shutdown()
    restarted = make_broker(tmp_path, clock)
    try:
        after = restarted.offset_store.group_offsets("g")
        assert {tp: o.committed_offset for tp, o in after.items()} == {("t", 1): 5}
        assert len(restarted.offset_store.transactional) == 0
    finally:
        restarted.shutdown()


def test_deleting_a_group_drops_its_pending_transactional_offsets(
    broker: Broker, producer: tuple[int, int]
) -> None:
    pid, epoch = producer
    add_offsets_to_txn.handle(context(broker, 25, 3), AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"))
    broker.offset_store.commit_transactional("g", pid, epoch, {("t", 0): OffsetAndMetadata(3)})
    broker.offset_store.delete_group("g")
    assert not broker.offset_store.transactional.has_pending("g", ("t", 0))
    assert end(broker, pid, epoch, commit=True) == 0
    assert broker.offset_store.fetch("g", "t", 0) is None
