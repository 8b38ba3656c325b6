"""The Kafka requests the cluster bench sends, with Samsa's own ``NodeClient`` (one connection
to one node, requests pipelined on it and answered in order).

Why not librdkafka's or Samsa's admin client: both send CreateTopics straight to the
controller the metadata names (as Kafka's admin client does), so a request would never be
forwarded; the bench sends each request to the node it chose, which forwards it to the active
controller when it is not that controller itself (Kafka's forwarding, KIP-590).

Every function here is a coroutine run by the caller's event loop; nothing keeps state.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.describe_quorum_response import DescribeQuorumResponse
from protocol.messages.describe_quorum_response import PartitionData as DescribeQuorumPartition
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse

METADATA_TOPIC = "__cluster_metadata"
CREATE_TIMEOUT_MS = 60_000


def client(port: int, *, request_timeout_ms: int = 30_000) -> NodeClient:
    return NodeClient("127.0.0.1", port, client_id="samsa-bench",
                      request_timeout_ms=request_timeout_ms)


async def quorum_state(node: NodeClient) -> DescribeQuorumPartition:
    """The metadata partition's quorum state as DescribeQuorum through ``node`` reports it (the
    active controller's view, forwarded); RuntimeError on an error code."""
    request = DescribeQuorumRequest(topics=[TopicData(
        topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])])
    response = await node.send(request)
    assert isinstance(response, DescribeQuorumResponse)
    if response.error_code or not response.topics or not response.topics[0].partitions:
        raise RuntimeError(f"DescribeQuorum: {ErrorCode(response.error_code).name}")
    partition = response.topics[0].partitions[0]
    if partition.error_code:
        raise RuntimeError(f"DescribeQuorum: {ErrorCode(partition.error_code).name}")
    return partition


async def quorum_leader(node: NodeClient) -> int | None:
    """The metadata quorum's leader as DescribeQuorum through ``node`` reports it (None: no
    leader)."""
    partition = await quorum_state(node)
    return partition.leader_id if partition.leader_id >= 0 else None


async def metadata(node: NodeClient) -> MetadataResponse:
    """Metadata for no topic: the live (unfenced) brokers and the controller id."""
    response = await node.send(MetadataRequest(topics=[], allow_auto_topic_creation=False))
    assert isinstance(response, MetadataResponse)
    return response


async def metadata_for(node: NodeClient, names: Sequence[str]) -> MetadataResponse:
    response = await node.send(MetadataRequest(
        topics=[MetadataRequestTopic(name=name) for name in names],
        allow_auto_topic_creation=False))
    assert isinstance(response, MetadataResponse)
    return response


async def live_brokers(node: NodeClient) -> set[int]:
    return {broker.node_id for broker in (await metadata(node)).brokers}


async def create_topics(node: NodeClient, names: Sequence[str], *, replication_factor: int,
                        partitions: int = 1,
                        timeout_ms: int = CREATE_TIMEOUT_MS) -> dict[str, int]:
    """One CreateTopics request for ``names``: each topic's error code (0: created)."""
    request = CreateTopicsRequest(timeout_ms=timeout_ms, topics=[
        CreatableTopic(name=name, num_partitions=partitions,
                       replication_factor=replication_factor) for name in names])
    response = await node.send(request)
    assert isinstance(response, CreateTopicsResponse)
    return {topic.name: topic.error_code for topic in response.topics}
