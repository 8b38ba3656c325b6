"""Samsa against Apache Kafka itself: the same requests to both, the answers compared.

One Apache Kafka 4.3.1 node (``apache_kafka``, KRaft combined mode) and one Samsa broker
(configured as the Kafka node where the test fixture departs from Kafka's defaults:
``group.initial.rebalance.delay.ms=0``) live for the whole module. Each test sends scripted
request sequences (``differential_requests.py``), built with Samsa's generated codec at the
versions modern clients use and at the oldest and newest versions both brokers advertise, and
compares the responses field by field (``differential.py``); whatever may differ is in its
``ALLOWLIST`` or ``SITUATIONAL`` entries, each with its reason.

Sequences: ApiVersions (the ranges: which APIs one broker has and the other lacks); requests
both must refuse (unknown API key, unsupported version, ApiVersions above its range);
CreateTopics (valid, duplicate, invalid names, bad partitions / replication factor / config
names / values, validate_only); Metadata (existing, missing, auto-created, by topic id);
DeleteTopics; Produce (acks 0/1/-1/2, missing partition or topic, corrupt CRC, oversize,
idempotent duplicates / gaps / fenced epoch, transactional outside a transaction);
ListOffsets (earliest, latest, max timestamp, by timestamp, bad partition); Fetch (out of
range, size limits, an empty partition, read_committed with an aborted transaction);
AddPartitionsToTxn / EndTxn error paths; DeleteRecords; DescribeConfigs (topic, broker),
AlterConfigs, IncrementalAlterConfigs (bad names and values, validate_only); DescribeCluster;
DescribeLogDirs; a consumer group (unknown member, wrong generation, commits, leave).

Retriable answers while a coordinator loads are retried, as clients do (``settled``); topic
creation waits until both brokers lead every partition (``await_leaders``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compat.apache_kafka import ApacheKafka
from protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_assignment import TopicPartition as AssignedPartition
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.heartbeat_request import HeartbeatRequest
from protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.differential import (
    ALLOWLIST,
    ALTER_CONFIGS,
    API_VERSIONS,
    AUTO_CREATING,
    BROKER_CONFIG_DIFFERENCES,
    BROKER_CONFIGS_ONLY_IN_KAFKA,
    CLOSED,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS,
    DUPLICATE_APPEND_TIME,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INCREMENTAL_ALTER_CONFIGS,
    JOIN_GROUP,
    JOIN_LEADER,
    LEAVE_GROUP,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SITUATIONAL,
    SYNC_GROUP,
    UNKNOWN_OPERATION,
    USED,
    Difference,
    Pair,
    Wire,
)
from tests.integration.kafka.differential_requests import (
    APPEND,
    BROKER_RESOURCE,
    CONCURRENT_TRANSACTIONS,
    DELETE,
    EARLIEST,
    LATEST,
    LIST_OFFSETS_MODERN,
    MAX_TIMESTAMP,
    SET,
    SUBTRACT,
    T0,
    TOPIC_RESOURCE,
    add_partitions,
    await_leaders,
    await_stable,
    batch,
    compare_list_offsets,
    corrupt,
    create_topic,
    describe,
    each,
    end_txn,
    fetch,
    init_producer_id,
    name,
    produce,
    settled,
    settled_one,
    span,
    topic_ids,
    transactional_producer,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("samsa")
    broker = BrokerProcess(log_dir=directory / "logs", stderr_path=directory / "broker.log",
                           overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker
    assert broker.stop() == 0, broker.log()[-3000:]


@pytest.fixture(scope="module")
def pair(apache_kafka: ApacheKafka, samsa: BrokerProcess) -> Iterator[Pair]:
    connections = Pair(Wire(("127.0.0.1", apache_kafka.port)), Wire((samsa.host, samsa.port)))
    yield connections
    connections.close()


@pytest.fixture(scope="module")
def versions(pair: Pair) -> dict[int, tuple[int, int]]:
    """API key -> (oldest, newest) version both brokers advertise."""
    kafka, samsa = pair.both(ApiVersionsRequest(client_software_name="differential",
                                                client_software_version="1"), 3)
    ranges = {api.api_key: (api.min_version, api.max_version) for api in samsa.api_keys}
    return {api.api_key: (max(api.min_version, ranges[api.api_key][0]),
                          min(api.max_version, ranges[api.api_key][1]))
            for api in kafka.api_keys if api.api_key in ranges}


# -- ApiVersions and requests both must refuse --------------------------------------------------


def test_api_versions(pair: Pair) -> None:
    for version in (0, 3):
        pair.compare(ApiVersionsRequest(client_software_name="differential",
                                        client_software_version="1"), version)


def test_api_versions_above_the_newest_is_answered_at_v0(pair: Pair) -> None:
    """A v0 UNSUPPORTED_VERSION answer listing the ranges, so the client can pick one."""
    request = ApiVersionsRequest(client_software_name="differential", client_software_version="1")
    kafka, samsa = (wire.call_raw(wire.frame(request, 3, claimed_version=127), API_VERSIONS, 0)
                    for wire in (pair.kafka, pair.samsa))
    assert kafka.error_code == samsa.error_code == 35
    pair.assert_same(API_VERSIONS, 0, kafka, samsa)


def test_unknown_api_key_and_unsupported_version_close_the_connection(pair: Pair) -> None:
    """Kafka cannot parse such a request, so it closes the connection; Samsa must too."""
    for api_key, version in ((999, 0), (METADATA, 99), (PRODUCE, 99)):
        kafka = pair.kafka.call_raw(pair.kafka.raw(api_key, version, bytes(8)), METADATA, 0)
        samsa = pair.samsa.call_raw(pair.samsa.raw(api_key, version, bytes(8)), METADATA, 0)
        assert (kafka, samsa) == (CLOSED, CLOSED), (api_key, version)


# -- topics: CreateTopics, Metadata, DeleteTopics ----------------------------------------------

CREATE_CASES: list[tuple[str, int, int, dict[str, str]]] = [
    # (topic stem, partitions, replication factor, configs)
    ("valid", 2, 1, {}),
    ("valid", 2, 1, {}),  # again: TOPIC_ALREADY_EXISTS
    ("bad/name", 1, 1, {}),
    ("x" * 250, 1, 1, {}),
    ("defaults", -1, -1, {}),
    ("zero-partitions", 0, 1, {}),
    ("too-many-replicas", 1, 3, {}),
    ("zero-replicas", 1, 0, {}),
    ("unknown-config", 1, 1, {"no.such.config": "1"}),
    ("bad-number", 1, 1, {"retention.ms": "abc"}),
    ("bad-policy", 1, 1, {"cleanup.policy": "bogus"}),
    ("bad-isr", 1, 1, {"min.insync.replicas": "0"}),
    ("configured", 3, 1, {"retention.ms": "1000", "cleanup.policy": "compact"}),
]


def test_create_topics(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, CREATE_TOPICS, 4, 7):
        for validate_only in ((False, True) if version >= 1 else (False,)):
            for stem, partitions, replication_factor, configs in CREATE_CASES:
                topic = stem if "/" in stem or len(stem) > 200 else \
                    name(f"{stem}-v{version}-{int(validate_only)}")
                pair.compare(CreateTopicsRequest(
                    timeout_ms=10000, validate_only=validate_only, topics=[CreatableTopic(
                        name=topic, num_partitions=partitions,
                        replication_factor=replication_factor,
                        configs=[CreatableTopicConfig(name=key, value=value)
                                 for key, value in configs.items()])]), version)


def test_metadata(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("metadata")
    create_topic(pair, topic, 3)
    for version in span(versions, METADATA, 9, 12):
        pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), version)
        if version >= 4:
            pair.compare(MetadataRequest(topics=[MetadataRequestTopic(
                name=name(f"missing-v{version}"))], allow_auto_topic_creation=False), version)
            pair.compare(MetadataRequest(topics=[MetadataRequestTopic(
                name="bad/name")], allow_auto_topic_creation=True), version)
    newest = versions[METADATA][1]
    # By topic id (v12+): each broker is asked about its own id; an unknown id is refused.
    if newest >= 12:
        ids = {side: wire.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
               .topics[0].topic_id for side, wire in (("kafka", pair.kafka), ("samsa", pair.samsa))}
        each(pair, 12, lambda side: MetadataRequest(topics=[MetadataRequestTopic(
            topic_id=ids[side])]))
        pair.compare(MetadataRequest(topics=[MetadataRequestTopic(topic_id=uuid.uuid4())]), 12)


def test_metadata_auto_creates_a_missing_topic(pair: Pair) -> None:
    topic = name("auto-created")
    pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                 allow_auto_topic_creation=True), 12, allow=[AUTO_CREATING])
    await_leaders(pair, topic)
    pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)


def test_delete_topics(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, DELETE_TOPICS, 4):
        topic = name(f"deleted-v{version}")
        create_topic(pair, topic)
        if version >= 6:
            topics = [DeleteTopicState(name=topic), DeleteTopicState(name=name("never")),
                      DeleteTopicState(topic_id=uuid.uuid4())]
            pair.compare(DeleteTopicsRequest(topics=topics, timeout_ms=10000), version)
        else:
            pair.compare(DeleteTopicsRequest(topic_names=[topic, name("never")],
                                             timeout_ms=10000), version)


# -- records: Produce, ListOffsets, Fetch, DeleteRecords ---------------------------------------


def test_produce(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, PRODUCE, 7, 9, least=3):  # v0-v2 are listed, not served
        topic = name(f"produce-v{version}")
        create_topic(pair, topic, 2)
        for request in (produce(topic, batch(), acks=1), produce(topic, batch(3, first=2)),
                        produce(topic, batch(), partition=5),
                        produce(name("produce-missing"), batch()),
                        produce(topic, corrupt(batch())),
                        produce(topic, batch(1, value_size=1_100_000)),
                        produce(topic, batch(), acks=2)):
            pair.compare(request, version)
        pair.both(produce(topic, batch(), acks=0), version, expect_response=False)
        compare_list_offsets(pair, version=LIST_OFFSETS_MODERN, topic=topic,
                             timestamps=(LATEST,), partitions=(0,))


def test_idempotent_produce(pair: Pair) -> None:
    topic = name("idempotent")
    create_topic(pair, topic)
    producers = init_producer_id(pair)

    def send(sequence: int, count: int = 2) -> Any:
        return lambda side: produce(topic, batch(count, producer_id=producers[side][0],
                                                 producer_epoch=producers[side][1],
                                                 base_sequence=sequence))

    for sequence in (0, 2, 2, 0, 7, 4):  # in order, a duplicate, an older duplicate, a gap
        each(pair, 9, send(sequence), allow=[DUPLICATE_APPEND_TIME])
    bumped = {side: (pid, epoch + 1) for side, (pid, epoch) in producers.items()}
    each(pair, 9, lambda side: produce(topic, batch(producer_id=bumped[side][0],
                                                    producer_epoch=bumped[side][1],
                                                    base_sequence=5)))
    each(pair, 9, lambda side: produce(topic, batch(producer_id=123456789, producer_epoch=0,
                                                    base_sequence=3)))


def test_transactional_produce_outside_a_transaction(pair: Pair) -> None:
    topic = name("not-in-transaction")
    create_topic(pair, topic)
    transactional_id = name("txn-none")
    producers = transactional_producer(pair, transactional_id)
    each(pair, 9, lambda side: produce(topic, batch(
        producer_id=producers[side][0], producer_epoch=producers[side][1], base_sequence=0,
        transactional=True), transactional_id=transactional_id))


def test_list_offsets(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("list-offsets")
    create_topic(pair, topic, 2)
    pair.compare(produce(topic, batch(3)), 9)
    pair.compare(produce(topic, batch(2, first=3)), 9)
    for version in span(versions, LIST_OFFSETS, 1, LIST_OFFSETS_MODERN):
        timestamps = (LATEST, EARLIEST, T0 - 1, T0 + 1000, T0 + 1500, T0 + 4000, T0 + 99_000,
                      *((MAX_TIMESTAMP,) if version >= 7 else ()))
        compare_list_offsets(pair, version=version, topic=topic, timestamps=timestamps,
                             partitions=(0, 1, 7))


def test_fetch(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("fetch")
    create_topic(pair, topic, 2)
    for first in (0, 3, 6):
        pair.compare(produce(topic, batch(3, first=first)), 9)
    ids = topic_ids(pair, topic)
    for version in span(versions, FETCH, 11, 12):
        named: str | dict[str, uuid.UUID] = ids if version >= 13 else topic
        for options in ({}, {"offset": 3}, {"offset": 4}, {"offset": 9}, {"offset": 10},
                        {"offset": -1}, {"partition": 1}, {"partition": 9},
                        {"partition_max_bytes": 10}, {"max_bytes": 10},
                        {"offset": 3, "partition_max_bytes": 200}):
            each(pair, version, lambda side, o=options, n=named, v=version:
                 fetch(n, v, side, **o))


# -- transactions: AddPartitionsToTxn, EndTxn, read_committed Fetch ----------------------------


def test_transaction_error_paths(pair: Pair) -> None:
    topic = name("txn-errors")
    create_topic(pair, topic)
    transactional_id = name("txn-errors")
    producers = transactional_producer(pair, transactional_id)
    each(pair, 4, end_txn(transactional_id, producers, committed=True))  # nothing to end
    each(pair, 3, add_partitions(transactional_id, producers, topic, [0], epoch_delta=1))
    each(pair, 3, add_partitions(transactional_id, producers, topic, [0], epoch_delta=-1))
    each(pair, 3, add_partitions(transactional_id, producers, topic, [0], producer_id=987654))
    each(pair, 3, add_partitions(transactional_id, producers, topic, [7]))
    each(pair, 3, add_partitions(name("txn-unknown"), producers, topic, [0]))
    each(pair, 4, end_txn(name("txn-unknown"), producers, committed=False))
    each(pair, 3, add_partitions(transactional_id, producers, topic, [0]))
    each(pair, 4, end_txn(transactional_id, producers, committed=False, epoch_delta=1))
    each(pair, 4, end_txn(transactional_id, producers, committed=False, producer_id=987654))
    each(pair, 4, end_txn(transactional_id, producers, committed=False))
    # Committing what was aborted: CONCURRENT_TRANSACTIONS while the abort's markers are
    # written (how long is each broker's own), then INVALID_TXN_STATE.
    committing = end_txn(transactional_id, producers, committed=True)
    answers = [settled_one(wire, committing(side), 4, {CONCURRENT_TRANSACTIONS})
               for side, wire in (("kafka", pair.kafka), ("samsa", pair.samsa))]
    pair.assert_same(END_TXN, 4, *answers)


def test_read_committed_fetch_lists_aborted_transactions(
        pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("read-committed")
    create_topic(pair, topic)
    transactional_id = name("txn-aborted")
    producers = transactional_producer(pair, transactional_id)
    pair.compare(produce(topic, batch(2)), 9)  # offsets 0-1, plain
    each(pair, 3, add_partitions(transactional_id, producers, topic, [0]))
    each(pair, 9, lambda side: produce(topic, batch(
        3, first=2, producer_id=producers[side][0], producer_epoch=producers[side][1],
        base_sequence=0, transactional=True), transactional_id=transactional_id))
    for isolation_level in (0, 1):  # offsets 2-4 open: the last stable offset is 2
        pair.compare(fetch(topic, 12, isolation_level=isolation_level), 12)
    each(pair, 4, end_txn(transactional_id, producers, committed=False))
    await_stable(pair, topic, 6)  # the abort marker at 5
    pair.compare(produce(topic, batch(1, first=6)), 9)  # offset 6, plain
    for version in span(versions, FETCH, 11, 12):
        for isolation_level in (0, 1):
            for offset in (0, 2, 5, 6, 7):
                each(pair, version, lambda side, v=version, i=isolation_level, o=offset: fetch(
                    topic_ids(pair, topic) if v >= 13 else topic, v, side, offset=o,
                    isolation_level=i))
    for isolation_level in (0, 1):
        pair.compare(ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(
                partition_index=0, timestamp=LATEST)])]), LIST_OFFSETS_MODERN)


# -- DeleteRecords ----------------------------------------------------------------------------


def test_delete_records(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, DELETE_RECORDS):
        topic = name(f"delete-records-v{version}")
        create_topic(pair, topic, 2)
        pair.compare(produce(topic, batch(5)), 9)
        for partitions in ([(0, 2)], [(0, 1)], [(0, -1)], [(0, 6)], [(1, 0)], [(5, 0)],
                           [(0, 3), (1, 0)]):
            pair.compare(DeleteRecordsRequest(timeout_ms=10000, topics=[DeleteRecordsTopic(
                name=topic, partitions=[DeleteRecordsPartition(partition_index=p, offset=o)
                                        for p, o in partitions])]), version)
        pair.compare(DeleteRecordsRequest(timeout_ms=10000, topics=[DeleteRecordsTopic(
            name=name("never"), partitions=[DeleteRecordsPartition(0, 0)])]), version)
        compare_list_offsets(pair, version=LIST_OFFSETS_MODERN, topic=topic,
                             timestamps=(EARLIEST, LATEST, T0), partitions=(0, 1))


# -- configs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs ---------------------------


def test_describe_topic_configs(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("described")
    create_topic(pair, topic, retention_ms="3600000", cleanup_policy="compact")
    for version in span(versions, DESCRIBE_CONFIGS, 1, 4):
        pair.compare(describe(TOPIC_RESOURCE, topic, synonyms=version >= 1), version)
        pair.compare(describe(TOPIC_RESOURCE, topic, ["retention.ms", "no.such.config"]),
                     version)
        pair.compare(describe(TOPIC_RESOURCE, name("never")), version)
        pair.compare(describe(TOPIC_RESOURCE, ""), version)


def test_describe_broker_configs(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    """The broker's configs: the names both have must agree on everything but the values this
    test's brokers set differently; BROKER_CONFIGS_ONLY_IN_KAFKA lists Kafka's others."""
    for version in span(versions, DESCRIBE_CONFIGS, 4):
        kafka, samsa = pair.compare(describe(BROKER_RESOURCE, "1"), version,
                                    allow=BROKER_CONFIG_DIFFERENCES)
        pair.compare(describe(BROKER_RESOURCE, "2"), version)
        pair.compare(describe(BROKER_RESOURCE, "not-a-number"), version)
    names = {c.name for c in kafka.results[0].configs} - {c.name for c in samsa.results[0].configs}
    assert names == BROKER_CONFIGS_ONLY_IN_KAFKA, sorted(names ^ BROKER_CONFIGS_ONLY_IN_KAFKA)


def test_alter_configs(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("altered")
    create_topic(pair, topic)
    cases = [{"retention.ms": "7200000"}, {"retention.ms": "abc"}, {"no.such.config": "1"},
             {"cleanup.policy": "bogus"}, {"min.insync.replicas": "0"}, {"retention.ms": None}]
    for version in span(versions, ALTER_CONFIGS):
        for validate_only in (True, False):
            for configs in cases:
                pair.compare(AlterConfigsRequest(validate_only=validate_only, resources=[
                    AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic,
                                         configs=[AlterableConfig(name=k, value=v)
                                                  for k, v in configs.items()])]), version)
                pair.compare_settled(describe(TOPIC_RESOURCE, topic, ["retention.ms"]), 4)
        pair.compare(AlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name("never"),
            configs=[AlterableConfig(name="retention.ms", value="1")])]), version)


def test_incremental_alter_configs(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("incremental")
    create_topic(pair, topic)
    cases = [("retention.ms", SET, "7200000"), ("retention.ms", SET, "abc"),
             ("no.such.config", SET, "1"), ("cleanup.policy", APPEND, "compact"),
             ("cleanup.policy", SUBTRACT, "delete"), ("cleanup.policy", SET, "bogus"),
             ("retention.ms", APPEND, "1"), ("retention.ms", DELETE, None),
             ("min.insync.replicas", SET, "0"), ("retention.ms", 9, "1")]
    for version in span(versions, INCREMENTAL_ALTER_CONFIGS):
        for validate_only in (True, False):
            for key, operation, value in cases:
                pair.compare(IncrementalAlterConfigsRequest(
                    validate_only=validate_only, resources=[IncrementalResource(
                        resource_type=TOPIC_RESOURCE, resource_name=topic,
                        configs=[IncrementalConfig(name=key, config_operation=operation,
                                                   value=value)])]), version,
                             allow=[UNKNOWN_OPERATION] if operation > SUBTRACT else [])
                pair.compare_settled(describe(TOPIC_RESOURCE, topic,
                                              ["retention.ms", "cleanup.policy"]), 4)


# -- the cluster: DescribeCluster, DescribeLogDirs ---------------------------------------------


def test_describe_cluster(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, DESCRIBE_CLUSTER):
        pair.compare(DescribeClusterRequest(), version)


def test_describe_log_dirs(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("log-dirs")
    create_topic(pair, topic, 2)
    pair.compare(produce(topic, batch(3)), 9)
    for version in span(versions, DESCRIBE_LOG_DIRS):
        pair.compare(DescribeLogDirsRequest(topics=[DescribableLogDirTopic(
            topic=topic, partitions=[0, 1, 5])]), version)
        pair.compare(DescribeLogDirsRequest(topics=[DescribableLogDirTopic(
            topic=name("never"), partitions=[0])]), version)


def test_the_free_space_allowance_covers_two_readings_not_another_reckoning() -> None:
    allowance = next(entry for entry in ALLOWLIST if entry.within is not None)
    path = "results[0].usable_bytes"
    moments_apart = Difference(path, 79_054_606_336, 79_054_598_144)  # a CI run's two readings
    free_not_available = Difference(path, 79_054_606_336, 92_581_234_688)  # + reserved blocks
    assert allowance.covers(DESCRIBE_LOG_DIRS, moments_apart)
    assert not allowance.covers(DESCRIBE_LOG_DIRS, free_not_available)


# -- consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
#    OffsetFetch, LeaveGroup ----------------------------------------------------------------

GROUP_APIS = (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH,
              LEAVE_GROUP)
# The consumer protocol's embedded messages (int16 version, then the message): Kafka 4's group
# coordinator reads them, and fails a join whose subscription it cannot decode.
SUBSCRIPTION = struct.pack(">h", 0) + ConsumerProtocolSubscription(topics=["t"]).encode(0)
ASSIGNMENT = struct.pack(">h", 0) + ConsumerProtocolAssignment(assigned_partitions=[
    AssignedPartition(topic="t", partitions=[0])]).encode(0)
MEMBER_ID_REQUIRED_VERSION = 4  # JoinGroup: from v4 a new member is told its id first


def test_consumer_group(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("group-offsets")
    create_topic(pair, topic)
    for pick in (0, 1):  # the oldest versions both serve, then the newest
        chosen = {api: versions[api][pick] for api in GROUP_APIS}
        group_sequence(pair, name(f"group-{pick}"), topic, chosen)


def group_sequence(pair: Pair, group: str, topic: str, v: dict[int, int]) -> None:
    find_coordinator(pair, group, v[FIND_COORDINATOR])
    members = join(pair, group, v[JOIN_GROUP])
    generation = 1

    def sync(generation_id: int, member: dict[str, str] | None = None) -> Any:
        ids = member or members
        return lambda side: SyncGroupRequest(
            group_id=group, generation_id=generation_id, member_id=ids[side],
            protocol_type="consumer" if v[SYNC_GROUP] >= 5 else None,
            protocol_name="range" if v[SYNC_GROUP] >= 5 else None,
            assignments=[SyncGroupRequestAssignment(member_id=ids[side], assignment=ASSIGNMENT)])

    def heartbeat(generation_id: int, member: dict[str, str] | None = None) -> Any:
        ids = member or members
        return lambda side: HeartbeatRequest(group_id=group, generation_id=generation_id,
                                             member_id=ids[side])

    def commit(generation_id: int, member: dict[str, str] | None, offset: int) -> Any:
        ids = member or {"kafka": "", "samsa": ""}
        return lambda side: OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation_id, member_id=ids[side],
            topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                             committed_metadata="m")])])

    stranger = {"kafka": "stranger", "samsa": "stranger"}
    for build in (sync(generation + 1), sync(generation, stranger), sync(generation)):
        each(pair, v[SYNC_GROUP], build)
    for build in (heartbeat(generation), heartbeat(generation + 1),
                  heartbeat(generation, stranger)):
        each(pair, v[HEARTBEAT], build)
    for build in (commit(generation, members, 5), commit(generation + 1, members, 6),
                  commit(generation, stranger, 7), commit(-1, None, 8)):
        each(pair, v[OFFSET_COMMIT], build)
    pair.compare(offset_fetch(group, topic, v[OFFSET_FETCH]), v[OFFSET_FETCH])
    pair.compare(offset_fetch(name("no-group"), topic, v[OFFSET_FETCH]), v[OFFSET_FETCH])
    each(pair, v[LEAVE_GROUP], lambda side: leave(group, stranger[side], v[LEAVE_GROUP]))
    each(pair, v[LEAVE_GROUP], lambda side: leave(group, members[side], v[LEAVE_GROUP]))
    each(pair, v[HEARTBEAT], heartbeat(generation))  # gone: UNKNOWN_MEMBER_ID


def find_coordinator(pair: Pair, group: str, version: int) -> None:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        answers = settled(pair, request, version,
                          lambda response: [c.error_code for c in response.coordinators])
    else:
        request = FindCoordinatorRequest(key=group, key_type=0)
        answers = settled(pair, request, version, lambda response: [response.error_code])
    pair.assert_same(FIND_COORDINATOR, version, *answers, request=request)


def join(pair: Pair, group: str, version: int) -> dict[str, str]:
    """A member that joins alone: told its id first from v4, then the leader of generation 1."""
    def request(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, member_id=member_id,
            rebalance_timeout_ms=10000 if version >= 1 else -1, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])

    # Retried while the group's coordinator loads (Kafka: NOT_COORDINATOR for a moment after
    # FindCoordinator has named it), as clients do.
    kafka, samsa = settled(pair, request(""), version, lambda response: [response.error_code])
    pair.assert_same(JOIN_GROUP, version, kafka, samsa, allow=[JOIN_LEADER], request=request(""))
    members = {"kafka": kafka.member_id, "samsa": samsa.member_id}
    if version >= MEMBER_ID_REQUIRED_VERSION:
        each(pair, version, lambda side: request(members[side]), allow=[JOIN_LEADER])
    return members


def offset_fetch(group: str, topic: str, version: int) -> OffsetFetchRequest:
    if version >= 8:
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=[
            OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 3])])])
    return OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0, 3])])


def leave(group: str, member_id: str, version: int) -> LeaveGroupRequest:
    if version >= 3:
        return LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id=member_id)])
    return LeaveGroupRequest(group_id=group, member_id=member_id)


# -- the allowlist itself ------------------------------------------------------------------


def test_every_allowlist_entry_is_still_needed(request: pytest.FixtureRequest) -> None:
    """Run last: an entry no difference used is stale (Samsa or Kafka changed) and must go.
    Only when the whole module ran and passed (a selection leaves entries unused)."""
    selected = [item for item in request.session.items if item.module is request.module]
    if len(selected) < len(TESTS) or request.session.testsfailed:
        pytest.skip("only meaningful after the whole module passed")
    unused = [entry for entry in (*ALLOWLIST, *SITUATIONAL)
              if entry not in USED and not entry.sometimes]
    assert not unused, "\n".join(f"{entry.api} {entry.path}: {entry.why}" for entry in unused)


TESTS = [value for key, value in dict(globals()).items() if key.startswith("test_")]
