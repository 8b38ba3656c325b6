"""ElectLeaders: v0–v2.

In a KRaft cluster (``process.roles`` set) the request is forwarded to the active controller
(``broker.forwarding``), which plans the elections against its committed image
(``replication.controller.elections.plan_elect_leaders``) and answers once they are committed:
PREFERRED (type 0, the only type of v0) gives each partition its first replica if that broker
is active and in the ISR (ELECTION_NOT_NEEDED when it already leads, else
PREFERRED_LEADER_NOT_AVAILABLE); UNCLEAN (type 1) gives a leaderless partition a leader from
the ISR, else any active replica whatever the topic's ``unclean.leader.election.enable``
(ELECTION_NOT_NEEDED when it has one, ELIGIBLE_LEADERS_NOT_AVAILABLE when none can lead);
unknown partitions get UNKNOWN_TOPIC_OR_PARTITION. ``topic_partitions`` null = every partition,
and only the partitions that needed an election are reported. The answer says the new leaders
are committed to the metadata; brokers take the roles as they apply it (Kafka's KRaft answers
the same way, not waiting for the brokers).

Samsa's single node (no ``process.roles``) leads every partition and is every partition's
preferred replica: each named partition that exists gets ELECTION_NOT_NEEDED, one that does not
exist UNKNOWN_TOPIC_OR_PARTITION; with ``topic_partitions`` null the answer is empty.

An unknown election type -> INVALID_REQUEST for the whole request.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from broker.commits import refusal, when_committed
from broker.responses import fit_to_version
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
from replication.controller.elections import ElectionResult

_PREFERRED, _UNCLEAN = 0, 1


def handle(context: RequestContext, request: ElectLeadersRequest) -> HandlerResult:
    if not authorize_cluster(context, AclOperation.ALTER):
        return _refused(context, request, ClusterAuthorizationFailedError())
    if request.election_type not in (_PREFERRED, _UNCLEAN):
        return _refused(context, request, InvalidRequestError(
            f"unknown election type {request.election_type}"))
    if context.broker.quorum is not None:
        return _elect_through_the_controller(context, request)
    return _single_node(context, request)


def _elect_through_the_controller(context: RequestContext, request: ElectLeadersRequest) -> HandlerResult:
    wanted = (None if request.topic_partitions is None else
              [(entry.topic, list(entry.partitions)) for entry in request.topic_partitions])
    proposal = context.broker.controller.elect_leaders(request.election_type, wanted)

    def respond() -> ElectLeadersResponse:
        error = refusal(proposal, "ElectLeaders")
        if error is not None:
            return _refused(context, request, error)
        return ElectLeadersResponse(replica_election_results=_by_topic(proposal.result()))

    return when_committed([proposal], respond)


def _by_topic(results: Iterable[ElectionResult]) -> list[ReplicaElectionResult]:
    """Results grouped by topic, topics in the order they first appear."""
    grouped: dict[str, list[PartitionResult]] = {}
    for result in results:
        grouped.setdefault(result.topic, []).append(PartitionResult(
            partition_id=result.partition_id, error_code=result.error_code,
            error_message=result.error_message))
    return [ReplicaElectionResult(topic=topic, partition_result=partitions)
            for topic, partitions in grouped.items()]


def _single_node(context: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
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


def _refused(context: RequestContext, request: ElectLeadersRequest,
             error: KafkaError) -> ElectLeadersResponse:
    """``error`` for every partition, and at the top level from v1 (v0 has no top-level error
    code: Kafka's ElectLeadersResponse sets it only ``if (version >= 1)``)."""
    return fit_to_version(error_response(request, error), context.api_version)  # type: ignore[return-value]


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
