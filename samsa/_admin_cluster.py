"""Admin operations on the cluster as a whole (a mixin of ``AsyncAdminClient``): its brokers
(DescribeCluster), the KRaft metadata quorum (DescribeQuorum) and the partitions' health
(Metadata).

Routing, as Kafka's admin client: all three go to any broker. A broker forwards DescribeQuorum
to the active controller (only the Raft leader can describe the quorum); a partition error
NOT_LEADER_OR_FOLLOWER (an election under way) is retried with ``Cluster.retrying``'s backoff.

``quorum_info(response)`` and ``summarize_partitions(topics, live)`` are pure: a response or
metadata in, the value types of ``samsa._admin_types`` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from protocol.codec import ZERO_UUID
from protocol.errors import ErrorCode, error_for_code
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_cluster_response import DescribeClusterResponse
from protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.describe_quorum_response import DescribeQuorumResponse
from protocol.messages.describe_quorum_response import ReplicaState as WireReplicaState
from samsa._admin_base import AdminCore, failure
from samsa._admin_types import (
    ClusterDescription,
    PartitionSummary,
    QuorumInfo,
    QuorumNode,
    RaftVoterEndpoint,
    ReplicaState,
)
from samsa.types import BrokerInfo, PartitionInfo, TopicInfo

__all__ = ["ClusterAdmin", "quorum_info", "summarize_partitions"]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
FIRST_FENCED_BROKERS_VERSION = 2  # DescribeCluster v2: IncludeFencedBrokers (KIP-1073)


class ClusterAdmin(AdminCore):
    """Brokers, the metadata quorum, the partitions' health."""

    async def describe_cluster(self, *, include_fenced_brokers: bool = False
                               ) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster, else Metadata);
        ``include_fenced_brokers`` adds the registered fenced brokers where the broker speaks
        DescribeCluster v2 (elsewhere only the unfenced are known)."""
        await self._bootstrap()

        async def describe() -> ClusterDescription:
            connection = await self.cluster.any_connection()
            if DescribeClusterRequest.API_KEY not in connection.api_versions:
                return await self._cluster_from_metadata()
            version = connection.version_for(DescribeClusterRequest)
            request = DescribeClusterRequest(include_fenced_brokers=(
                include_fenced_brokers and version >= FIRST_FENCED_BROKERS_VERSION))
            response: DescribeClusterResponse = await connection.request(request, version)
            if response.error_code:
                raise failure("the cluster", response.error_code, response.error_message).error
            brokers = sorted((BrokerInfo(b.broker_id, b.host, b.port, b.rack, b.is_fenced)
                              for b in response.brokers), key=lambda b: b.node_id)
            return ClusterDescription(response.cluster_id, response.controller_id, tuple(brokers))

        return await self.cluster.retrying(describe, what="DescribeCluster")

    async def _cluster_from_metadata(self) -> ClusterDescription:
        await self.cluster.refresh_metadata([])
        brokers = sorted(self.cluster.brokers.values(), key=lambda b: b.node_id)
        return ClusterDescription(self.cluster.cluster_id, self.cluster.controller_id,
                                  tuple(brokers))

    async def describe_quorum(self) -> QuorumInfo:
        """The KRaft metadata quorum as its leader sees it (DescribeQuorum, as Kafka's
        ``Admin.describeMetadataQuorum``)."""
        await self._bootstrap()
        request = DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA_TOPIC,
            partitions=[PartitionData(partition_index=METADATA_PARTITION)])])

        async def describe() -> QuorumInfo:
            connection = await self.cluster.any_connection()
            response: DescribeQuorumResponse = await connection.request(request)
            return quorum_info(response)

        return await self.cluster.retrying(describe, what="DescribeQuorum")

    async def summarize_partitions(self, *, include_internal: bool = True) -> PartitionSummary:
        """Every topic's partitions from Metadata: how many, which are under-replicated and
        which are offline (``internal`` topics such as ``__consumer_offsets`` unless told)."""
        await self._bootstrap()
        await self.cluster.retrying(lambda: self.cluster.refresh_metadata(None), what="Metadata")
        topics = [info for info in self.cluster.topics.values()
                  if include_internal or not info.is_internal]
        return summarize_partitions(topics, self.cluster.brokers)


def quorum_info(response: DescribeQuorumResponse) -> QuorumInfo:
    """The quorum of a DescribeQuorum response; its error (top-level, then the partition's)
    raised as its Kafka class, an answer about anything but ``__cluster_metadata``-0 as
    UNKNOWN_SERVER_ERROR (Kafka's ``handleResponse`` checks)."""
    if response.error_code:
        raise failure("the metadata quorum", response.error_code, response.error_message).error
    topics = response.topics
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC or len(
            topics[0].partitions) != 1 or topics[0].partitions[0].partition_index != 0:
        raise error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
            f"DescribeQuorum answered about something else than {METADATA_TOPIC}-0")
    partition = topics[0].partitions[0]
    if partition.error_code:
        raise failure("the metadata quorum", partition.error_code, partition.error_message).error
    leader_end = next((v.log_end_offset for v in partition.current_voters
                       if v.replica_id == partition.leader_id), partition.high_watermark)
    return QuorumInfo(
        leader_id=partition.leader_id, leader_epoch=partition.leader_epoch,
        high_watermark=partition.high_watermark,
        voters=tuple(_replica(v, leader_end) for v in partition.current_voters),
        observers=tuple(_replica(o, leader_end) for o in partition.observers),
        nodes={node.node_id: QuorumNode(node.node_id, tuple(
            RaftVoterEndpoint(listener.name, listener.host, listener.port)
            for listener in node.listeners)) for node in response.nodes},
    )


def _replica(state: WireReplicaState, leader_end: int) -> ReplicaState:
    directory = state.replica_directory_id
    return ReplicaState(
        replica_id=state.replica_id, log_end_offset=state.log_end_offset,
        lag=leader_end - state.log_end_offset,
        last_fetch_timestamp=_known(state.last_fetch_timestamp),
        last_caught_up_timestamp=_known(state.last_caught_up_timestamp),
        replica_directory_id=None if directory == ZERO_UUID else str(directory),
    )


def _known(timestamp: int) -> int | None:
    return None if timestamp < 0 else timestamp


def summarize_partitions(topics: Iterable[TopicInfo],
                         live: Mapping[int, BrokerInfo]) -> PartitionSummary:
    """The health of ``topics``' partitions given the ``live`` brokers, sorted by topic and
    partition: under-replicated when the ISR is smaller than the replicas, offline when the
    leader is -1 or not a live broker."""
    listed = sorted(topics, key=lambda topic: topic.name)
    partitions = [p for topic in listed for p in sorted(topic.partitions.values(),
                                                        key=lambda p: p.partition)]
    return PartitionSummary(
        topic_count=len(listed), partition_count=len(partitions),
        under_replicated=tuple(p for p in partitions if _under_replicated(p)),
        offline=tuple(p for p in partitions if p.leader < 0 or p.leader not in live),
    )


def _under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.isr) < len(partition.replicas)
