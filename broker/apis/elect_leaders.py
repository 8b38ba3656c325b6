"""ElectLeaders: v0–v2.

Samsa runs one node, which leads every partition and is every partition's preferred (first)
replica: a preferred election (type 0, the only type of v0) and an unclean one (type 1) are
never needed, so each named partition that exists gets ELECTION_NOT_NEEDED, as Kafka answers
for a partition already led by its preferred replica; one that does not exist gets
UNKNOWN_TOPIC_OR_PARTITION. ``topic_partitions`` null = "every partition": Kafka then reports
only the partitions it elected, so the answer is empty. An unknown election type ->
INVALID_REQUEST for the whole request.

Not implemented: ACLs (Kafka needs ALTER on the cluster).

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import (
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.elect_leaders_request import ElectLeadersRequest
from protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

_PREFERRED, _UNCLEAN = 0, 1


def handle(context: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    if not authorize_cluster(context, AclOperation.ALTER):
        return error_response(request, ClusterAuthorizationFailedError())
    if request.election_type not in (_PREFERRED, _UNCLEAN):
        return error_response(request, InvalidRequestError(
            f"unknown election type {request.election_type}"))
    image = context.broker.replica_manager.image
    results = []
    for entry in request.topic_partitions or ():
        topic = image.topics_by_name.get(entry.topic)
        partition_results = []
        for index in entry.partitions:
            exists = topic is not None and index in topic.partitions
            error: KafkaError = ElectionNotNeededError(
                "Leader election not needed for topic partition."
            ) if exists else UnknownTopicOrPartitionError()
            partition_results.append(PartitionResult(
                partition_id=index, error_code=error.code, error_message=error.message))
        results.append(ReplicaElectionResult(topic=entry.topic, partition_result=partition_results))
    return ElectLeadersResponse(replica_election_results=results)


def error_response(request: ElectLeadersRequest, error: KafkaError) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        error_code=error.code,
        replica_election_results=[
            ReplicaElectionResult(topic=entry.topic, partition_result=[
                PartitionResult(partition_id=index, error_code=error.code,
                                error_message=error.message)
                for index in entry.partitions])
            for entry in request.topic_partitions or ()
        ],
    )


SPEC = register(
    ApiSpec(
        api_key=ElectLeadersRequest.API_KEY,
        min_version=0,
        max_version=ElectLeadersRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ElectLeaders",
    )
)
