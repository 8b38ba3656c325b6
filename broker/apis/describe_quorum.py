"""DescribeQuorum: v0–v2.

The KRaft metadata quorum of this single node, as Kafka's ``KafkaRaftClient`` answers it on the
leader: the request must name exactly ``__cluster_metadata`` partition 0 (else each named
partition gets UNKNOWN_TOPIC_OR_PARTITION); the answer is this node as the leader and only voter,
the metadata log's leader epoch, its end offset as the high watermark (one voter: every appended
batch is committed once fsynced) and as the voter's log end offset, last fetch and caught-up
timestamps "now" (Kafka's values for the leader itself), no observers. v2 adds the voter's
directory id (zero: Samsa's log directories carry none) and its endpoints (the advertised
listeners; the node is its own controller).

Authorization (with an authorizer): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

In a KRaft cluster the answer is the Raft leader's: every voter and observer with its log end
offset and last fetch / caught-up times (``RaftNode.describe_quorum``), the voters' controller
endpoints from ``controller.quorum.voters``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.codec import ZERO_UUID
from protocol.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from replication.metadata.log import METADATA_PARTITION, METADATA_TOPIC
from replication.raft.node import ReplicaDescription

if TYPE_CHECKING:
    from broker.broker import Broker


def handle(context: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        return error_response(request, ClusterAuthorizationFailedError())
    if not _names_the_metadata_partition(request):
        return _partition_errors(request, UnknownTopicOrPartitionError())
    broker = context.broker
    if broker.quorum is not None:
        partition = _quorum_partition(broker)
    else:
        partition = _single_node_partition(broker)
    response = DescribeQuorumResponse(
        error_code=0, error_message=None,
        topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
    )
    if context.api_version >= 2:  # KIP-853: the voters' endpoints (not ignorable, unlike messages)
        response.nodes = _voter_nodes(broker)
    return response


def _single_node_partition(broker: Broker) -> PartitionData:
    metadata_log = broker.replica_manager.metadata_log
    assert metadata_log is not None
    end_offset = metadata_log.log.log_end_offset
    now = broker.replica_manager.clock.milliseconds()
    voter = ReplicaState(
        replica_id=broker.node_id, replica_directory_id=ZERO_UUID, log_end_offset=end_offset,
        last_fetch_timestamp=now, last_caught_up_timestamp=now,
    )
    return PartitionData(
        partition_index=METADATA_PARTITION, error_code=0, error_message=None,
        leader_id=broker.node_id, leader_epoch=metadata_log.leader_epoch,
        high_watermark=end_offset, current_voters=[voter], observers=[],
    )


def _quorum_partition(broker: Broker) -> PartitionData:
    """The Raft leader's view (Kafka's ``LeaderState.describeQuorum``); elsewhere
    NOT_LEADER_OR_FOLLOWER with the leader this node knows (a broker listener forwards the
    request to the active controller first)."""
    assert broker.quorum is not None
    node = broker.quorum.node
    try:
        description = node.describe_quorum(broker.clock.milliseconds())
    except NotLeaderOrFollowerError as error:
        return PartitionData(
            partition_index=METADATA_PARTITION, error_code=error.code, error_message=None,
            leader_id=-1 if node.leader_id is None else node.leader_id, leader_epoch=node.epoch)

    def state(replica: ReplicaDescription) -> ReplicaState:
        return ReplicaState(
            replica_id=replica.replica_id, replica_directory_id=ZERO_UUID,
            log_end_offset=replica.log_end_offset,
            last_fetch_timestamp=replica.last_fetch_timestamp,
            last_caught_up_timestamp=replica.last_caught_up_timestamp)

    return PartitionData(
        partition_index=METADATA_PARTITION, error_code=0, error_message=None,
        leader_id=description.leader_id, leader_epoch=description.leader_epoch,
        high_watermark=description.high_watermark,
        current_voters=[state(voter) for voter in description.voters],
        observers=[state(observer) for observer in description.observers],
    )


def _voter_nodes(broker: Broker) -> list[Node]:
    """Each voter's controller endpoints (this node's advertised listeners on a single node)."""
    if broker.quorum is None:
        return [Node(node_id=broker.node_id, listeners=[
            Listener(name=listener.name, host=listener.host, port=listener.port)
            for listener in broker.advertised
        ])]
    kraft = broker.config.kraft
    listener_name = kraft.controller_listener_names[0]
    return [Node(node_id=voter.node_id, listeners=[
        Listener(name=listener_name, host=voter.host, port=voter.port)])
        for voter in kraft.quorum.voters]


def _names_the_metadata_partition(request: DescribeQuorumRequest) -> bool:
    """Kafka's ``hasValidTopicPartition``: one topic, one partition, the metadata log's."""
    if len(request.topics) != 1 or request.topics[0].topic_name != METADATA_TOPIC:
        return False
    partitions = request.topics[0].partitions
    return len(partitions) == 1 and partitions[0].partition_index == METADATA_PARTITION


def _partition_errors(request: DescribeQuorumRequest, error: KafkaError) -> DescribeQuorumResponse:
    """Kafka's ``getPartitionLevelErrorResponse``: each named partition gets ``error``."""
    message = error.message or None
    return DescribeQuorumResponse(
        error_code=0, error_message=None,
        topics=[
            TopicData(topic_name=topic.topic_name, partitions=[
                PartitionData(partition_index=partition.partition_index, error_code=error.code,
                              error_message=message)
                for partition in topic.partitions
            ])
            for topic in request.topics
        ],
    )


def error_response(request: DescribeQuorumRequest, error: KafkaError) -> DescribeQuorumResponse:
    # The messages are v2+ and ignorable: the codec leaves them out of older versions.
    return DescribeQuorumResponse(error_code=error.code, error_message=error.message or None)


SPEC = register(
    ApiSpec(
        api_key=DescribeQuorumRequest.API_KEY,
        min_version=0,
        max_version=DescribeQuorumRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeQuorum",
    )
)
