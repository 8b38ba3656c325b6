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

Not implemented: other voters and observers (there are none until the Raft work).
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.codec import ZERO_UUID
from protocol.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
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


def handle(context: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        return error_response(request, ClusterAuthorizationFailedError())
    if not _names_the_metadata_partition(request):
        return _partition_errors(request, UnknownTopicOrPartitionError())
    broker = context.broker
    metadata_log = broker.replica_manager.metadata_log
    assert metadata_log is not None
    end_offset = metadata_log.log.log_end_offset
    now = broker.replica_manager.clock.milliseconds()
    voter = ReplicaState(
        replica_id=broker.node_id, replica_directory_id=ZERO_UUID, log_end_offset=end_offset,
        last_fetch_timestamp=now, last_caught_up_timestamp=now,
    )
    partition = PartitionData(
        partition_index=METADATA_PARTITION, error_code=0, error_message=None,
        leader_id=broker.node_id, leader_epoch=metadata_log.leader_epoch,
        high_watermark=end_offset, current_voters=[voter], observers=[],
    )
    response = DescribeQuorumResponse(
        error_code=0, error_message=None,
        topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
    )
    if context.api_version >= 2:  # KIP-853: the voters' endpoints (not ignorable, unlike messages)
        response.nodes = [Node(node_id=broker.node_id, listeners=[
            Listener(name=listener.name, host=listener.host, port=listener.port)
            for listener in broker.advertised
        ])]
    return response


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
