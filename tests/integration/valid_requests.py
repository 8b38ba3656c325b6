"""Hand-made valid requests at any version, and what their responses must say.

For the APIs clients use most, ``VALID_REQUESTS`` gives, per API key, a function that builds a
valid request at a given version against an existing topic (two partitions) and group, and a
function that checks the decoded response beyond "no error code anywhere" (which the test
asserts for all of them). They run in the listed order: Produce before Fetch and ListOffsets,
OffsetCommit before OffsetFetch. ``Scene`` carries what the broker has by then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.share.coordinator_key import kafka_uuid_string
from protocol.messages import delete_share_group_state_request as delete_share
from protocol.messages import initialize_share_group_state_request as initialize_share
from protocol.messages import read_share_group_state_request as read_share
from protocol.messages import read_share_group_state_summary_request as summary_share
from protocol.messages import write_share_group_state_request as write_share
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from protocol.messages.describe_groups_request import DescribeGroupsRequest
from protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.list_groups_request import ListGroupsRequest
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
from protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, encode_batch, iter_batches

__all__ = ["VALID_REQUESTS", "Scene"]

RECORDS_PER_BATCH = 2
EARLIEST, LATEST = -2, -1
CONSUMER_GROUP_KEY = 0
SHARE_KEY, SHARE_MIN_VERSION = 2, 6
CLUSTER_METADATA = "__cluster_metadata"
TOPIC_RESOURCE = 2


@dataclass
class Scene:
    topic: str
    topic_id: UUID
    group: str
    produced: list[tuple[bytes, bytes]] = field(default_factory=list)  # (key, value), partition 0
    sending: list[tuple[bytes, bytes]] = field(default_factory=list)  # in the last Produce
    committed: int = 0


Build = Callable[[Scene, int], Any]
Check = Callable[[Scene, int, Any], None]


def produce(scene: Scene, version: int) -> ProduceRequest:
    now = int(time.time() * 1000)
    first = len(scene.produced)
    scene.sending = [(b"key-%d" % (first + i), b"value-v%d-%d" % (version, i))
                     for i in range(RECORDS_PER_BATCH)]
    batch = encode_batch([Record(offset=i, timestamp=now, key=key, value=value)
                          for i, (key, value) in enumerate(scene.sending)])
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=scene.topic, partition_data=[PartitionProduceData(index=0, records=batch)])])


def produced(scene: Scene, version: int, response: Any) -> None:
    partition = response.responses[0].partition_responses[0]
    assert partition.base_offset == len(scene.produced)
    scene.produced += scene.sending


def fetch(scene: Scene, version: int) -> FetchRequest:
    topic = FetchTopic(partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                  partition_max_bytes=1 << 20)])
    if version >= 13:
        topic.topic_id = scene.topic_id
    else:
        topic.topic = scene.topic
    return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                        session_epoch=-1, topics=[topic])


def fetched(scene: Scene, version: int, response: Any) -> None:
    partition = response.responses[0].partitions[0]
    assert partition.high_watermark == len(scene.produced)
    records = [(record.key, record.value) for batch in iter_batches(partition.records)
               for record in batch.records]
    assert records == scene.produced


def list_offsets(scene: Scene, version: int) -> ListOffsetsRequest:
    # One lookup per partition: Kafka answers a partition named twice with INVALID_REQUEST.
    partitions = [ListOffsetsPartition(partition_index=0, timestamp=LATEST),
                  ListOffsetsPartition(partition_index=1, timestamp=EARLIEST)]
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=scene.topic, partitions=partitions)])


def listed_offsets(scene: Scene, version: int, response: Any) -> None:
    latest, earliest = response.topics[0].partitions
    assert (latest.offset, earliest.offset) == (len(scene.produced), 0)
    assert {latest.leader_epoch, earliest.leader_epoch} == {0 if version >= 4 else -1}


def metadata(scene: Scene, version: int) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=scene.topic)])


def described_topic(scene: Scene, version: int, response: Any) -> None:
    (topic,) = response.topics
    assert topic.name == scene.topic and len(topic.partitions) == 2


def offset_commit(scene: Scene, version: int) -> OffsetCommitRequest:
    scene.committed = version
    return OffsetCommitRequest(group_id=scene.group, topics=[OffsetCommitRequestTopic(
        name=scene.topic, partitions=[OffsetCommitRequestPartition(
            partition_index=0, committed_offset=version, committed_metadata=f"v{version}")])])


def offset_fetch(scene: Scene, version: int) -> OffsetFetchRequest:
    if version >= 8:
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id=scene.group, topics=[OffsetFetchRequestTopics(
                name=scene.topic, partition_indexes=[0])])])
    return OffsetFetchRequest(group_id=scene.group, topics=[OffsetFetchRequestTopic(
        name=scene.topic, partition_indexes=[0])])


def fetched_offsets(scene: Scene, version: int, response: Any) -> None:
    topics = response.groups[0].topics if version >= 8 else response.topics
    partition = topics[0].partitions[0]
    assert (partition.committed_offset, partition.metadata) == (scene.committed,
                                                               f"v{scene.committed}")


def find_coordinator(scene: Scene, version: int) -> FindCoordinatorRequest:
    if version >= SHARE_MIN_VERSION:  # key type SHARE; creates __share_group_state for 83-87
        share_key = f"{scene.group}:{kafka_uuid_string(scene.topic_id)}:0"
        return FindCoordinatorRequest(key_type=SHARE_KEY, coordinator_keys=[share_key])
    if version >= 4:
        return FindCoordinatorRequest(key_type=CONSUMER_GROUP_KEY, coordinator_keys=[scene.group])
    return FindCoordinatorRequest(key=scene.group, key_type=CONSUMER_GROUP_KEY)


def found_coordinator(scene: Scene, version: int, response: Any) -> None:
    node_id = response.coordinators[0].node_id if version >= 4 else response.node_id
    assert node_id >= 0


def initialize_share_state(scene: Scene, version: int) -> Any:
    return initialize_share.InitializeShareGroupStateRequest(group_id=scene.group, topics=[
        initialize_share.InitializeStateData(topic_id=scene.topic_id, partitions=[
            initialize_share.PartitionData(partition=0, state_epoch=1, start_offset=0)])])


def write_share_state(scene: Scene, version: int) -> Any:
    return write_share.WriteShareGroupStateRequest(group_id=scene.group, topics=[
        write_share.WriteStateData(topic_id=scene.topic_id, partitions=[write_share.PartitionData(
            partition=0, state_epoch=1, leader_epoch=0, start_offset=0, delivery_complete_count=2,
            state_batches=[write_share.StateBatch(first_offset=0, last_offset=1, delivery_state=2,
                                                  delivery_count=1)])])])


def read_share_state(scene: Scene, version: int) -> Any:
    return read_share.ReadShareGroupStateRequest(group_id=scene.group, topics=[
        read_share.ReadStateData(topic_id=scene.topic_id, partitions=[
            read_share.PartitionData(partition=0, leader_epoch=0)])])


def read_share_state_back(scene: Scene, version: int, response: Any) -> None:
    partition = response.results[0].partitions[0]
    assert (partition.state_epoch, partition.start_offset) == (1, 0)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in partition.state_batches] == [(0, 1, 2, 1)]


def summarize_share_state(scene: Scene, version: int) -> Any:
    return summary_share.ReadShareGroupStateSummaryRequest(group_id=scene.group, topics=[
        summary_share.ReadStateSummaryData(topic_id=scene.topic_id, partitions=[
            summary_share.PartitionData(partition=0, leader_epoch=0)])])


def summarized_share_state(scene: Scene, version: int, response: Any) -> None:
    partition = response.results[0].partitions[0]
    assert (partition.state_epoch, partition.start_offset) == (1, 0)
    if version >= 1:  # the count of the last write at v1 (written with -1 at v0)
        assert partition.delivery_complete_count == 2


def delete_share_state(scene: Scene, version: int) -> Any:
    return delete_share.DeleteShareGroupStateRequest(group_id=scene.group, topics=[
        delete_share.DeleteStateData(topic_id=scene.topic_id, partitions=[
            delete_share.PartitionData(partition=0)])])


def offset_for_leader_epoch(scene: Scene, version: int) -> OffsetForLeaderEpochRequest:
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(
        topic=scene.topic, partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)])])


def create_topics(scene: Scene, version: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(validate_only=True, timeout_ms=5000, topics=[CreatableTopic(
        name=f"{scene.topic}-v{version}", num_partitions=1, replication_factor=1)])


def describe_configs(scene: Scene, version: int) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=scene.topic, configuration_keys=None)])


def delete_records(scene: Scene, version: int) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsTopic(
        name=scene.topic, partitions=[DeleteRecordsPartition(partition_index=1, offset=0)])])


def describe_quorum(scene: Scene, version: int) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(topics=[TopicData(
        topic_name=CLUSTER_METADATA, partitions=[PartitionData(partition_index=0)])])


def nothing_more(scene: Scene, version: int, response: Any) -> None:
    pass


# API key -> (build, check), in the order they run.
VALID_REQUESTS: dict[int, tuple[Build, Check]] = {
    18: (lambda scene, version: ApiVersionsRequest(
        client_software_name="samsa-tests", client_software_version="1"), nothing_more),
    3: (metadata, described_topic),
    0: (produce, produced),
    1: (fetch, fetched),
    2: (list_offsets, listed_offsets),
    23: (offset_for_leader_epoch, nothing_more),
    10: (find_coordinator, found_coordinator),
    8: (offset_commit, nothing_more),
    9: (offset_fetch, fetched_offsets),
    15: (lambda scene, version: DescribeGroupsRequest(groups=[scene.group]), nothing_more),
    16: (lambda scene, version: ListGroupsRequest(), nothing_more),
    19: (create_topics, nothing_more),
    32: (describe_configs, nothing_more),
    22: (lambda scene, version: InitProducerIdRequest(transactional_id=None,
                                                      transaction_timeout_ms=60000), nothing_more),
    21: (delete_records, nothing_more),
    35: (lambda scene, version: DescribeLogDirsRequest(topics=[DescribableLogDirTopic(
        topic=scene.topic, partitions=[0, 1])]), nothing_more),
    55: (describe_quorum, nothing_more),
    60: (lambda scene, version: DescribeClusterRequest(), nothing_more),
    75: (lambda scene, version: DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=scene.topic)]), nothing_more),
    # the share coordinator's APIs (KIP-932), in the order a share partition's life takes them
    83: (initialize_share_state, nothing_more),
    85: (write_share_state, nothing_more),
    84: (read_share_state, read_share_state_back),
    87: (summarize_share_state, summarized_share_state),
    86: (delete_share_state, nothing_more),
}
