"""Metadata: v0–v12.

Brokers (this node, at the advertised endpoint of the client's listener), the cluster id, the controller (this node) and
the requested topics with their partitions, topic ids (v10+) and leader epochs (v7+). A topic
may be named by id from v12 (v10-v11 have the fields, but a null name or a topic id there is
INVALID_REQUEST for the whole request, as in Kafka). A missing topic is created when the
request allows it (v4+ flag; always for v0–v3) and ``auto.create.topics.enable`` is true, with
``num.partitions``; it is created synchronously, so the same response describes it.
``__cluster_metadata`` is not a topic clients can see; internal topics (``__consumer_offsets``...)
are never auto-created here.

Authorization (with an authorizer, as Kafka's ``KafkaApis.handleTopicMetadataRequest``): a
topic needs DESCRIBE; one named without it answers TOPIC_AUTHORIZATION_FAILED (by id: with
the id and no name; by name: with the name and a zero id), and an all-topics request leaves it
out. Auto-creation needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
v8+ ``include_topic_authorized_operations`` and v8–v10 ``include_cluster_authorized_operations``
fill in the allowed operations' bitfield (else Kafka's "not requested", -2147483648).

An all-topics request naming more than ``OFF_LOOP_ABOVE`` partitions (issue 18) is answered from
a snapshot taken on the loop (each topic's partition map, which topics still have logs loading,
the authorization): the topics are described and the whole frame encoded on a thread of the
loop's executor. At 50,000 partitions that is ~0.3 s of Python which, on the loop, held every
other client's request for all of it; on a thread the loop gets the GIL back every switch
interval (1 ms in the broker process, ``broker.daemon``). Both paths describe what ``_take``
copies, with ``_describe_taken``, so the answer is the same bytes either way (tested).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from uuid import UUID

from broker.apis import ApiSpec, RequestContext, ResponsePart, ZeroCopyResponse, register
from broker.auth import authorize, authorize_cluster, authorized_operations
from broker.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.commits import refusal
from protocol.codec import ZERO_UUID
from protocol.errors import (
    InvalidRequestError,
    InvalidTopicExceptionError,
    KafkaError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from protocol.frames import encode_response_message
from protocol.messages import response_header_version
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replication.controller.interface import NewTopic
from replication.metadata.controller import is_internal
from replication.metadata.image import PartitionImage, TopicImage
from replication.metadata.log import METADATA_TOPIC

logger = logging.getLogger("samsa.broker.apis.metadata")

TOPIC_IDS_VERSION = 12  # the first version that names topics by id
OFF_LOOP_ABOVE = 5_000  # partitions in an all-topics answer built off the loop (module docstring)


def handle(context: RequestContext,
           request: MetadataRequest) -> MetadataResponse | Awaitable[EncodedResponse]:
    broker = context.broker
    response = MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=rack)
            for node_id, host, port, rack in broker.live_brokers(context.listener_name)
        ],
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
    )
    wants_all = request.topics is None or (context.api_version == 0 and not request.topics)
    if wants_all:
        images = [topic for topic in broker.replica_manager.image.topics_by_name.values()
                  if authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)]
        if (not (context.api_version >= 8 and request.include_topic_authorized_operations)
                and sum(len(topic.partitions) for topic in images) > OFF_LOOP_ABOVE):
            _authorized_operations(context, request, response)  # the cluster's, on the loop
            return _all_topics_off_loop(context, response, images)
        response.topics = [_describe_hosted(context, topic) for topic in images]
    else:
        _check_names(context, request)
        allow_create = request.allow_auto_topic_creation or context.api_version < 4
        for requested in request.topics or ():
            response.topics.append(
                _topic(context, requested.name, requested.topic_id, allow_create)
            )
    _authorized_operations(context, request, response)
    return response


def _check_names(context: RequestContext, request: MetadataRequest) -> None:
    """v10 and v11 carry a topic id and a nullable name, but name topics only by name (as
    Kafka's ``KafkaApis``: INVALID_REQUEST for the whole request)."""
    if context.api_version >= TOPIC_IDS_VERSION:
        return
    for topic in request.topics or ():
        if topic.name is None or topic.topic_id != ZERO_UUID:
            raise InvalidRequestError(
                f"Metadata v{context.api_version} names topics by name only (null name or topic id)")


def _authorized_operations(
    context: RequestContext, request: MetadataRequest, response: MetadataResponse
) -> None:
    if context.api_version < 8:
        return
    if request.include_cluster_authorized_operations and context.api_version <= 10:
        response.cluster_authorized_operations = (
            authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorize_cluster(context, AclOperation.DESCRIBE) else 0
        )
    if request.include_topic_authorized_operations:
        for topic in response.topics:
            if topic.error_code != TopicAuthorizationFailedError.code and topic.name is not None:
                topic.topic_authorized_operations = authorized_operations(
                    context, ResourceType.TOPIC, topic.name
                )


def _topic(
    context: RequestContext, name: str | None, topic_id: UUID, allow_create: bool
) -> MetadataResponseTopic:
    manager = context.broker.replica_manager
    if name is None or (not name and topic_id != ZERO_UUID):
        topic = manager.topic_by_id(topic_id)
        if topic is None:
            return _error(None, topic_id, UnknownTopicIdError())
        if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return _error(None, topic_id, TopicAuthorizationFailedError())
        manager.hurry(topic.name)  # named: a client wants it, its logs load first
        return _describe_hosted(context, topic)
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error(name, ZERO_UUID, TopicAuthorizationFailedError())
    topic = manager.topic_by_name(name)
    if topic is not None:
        manager.hurry(name)  # named: a client wants it, its logs load first
        return _describe_hosted(context, topic)
    if name == METADATA_TOPIC or is_internal(name):
        # Internal topics are created by their coordinators, never by a Metadata request.
        return _error(name, ZERO_UUID, UnknownTopicOrPartitionError())
    if not (allow_create and context.broker.config.auto_create_topics_enable):
        return _error(name, ZERO_UUID, UnknownTopicOrPartitionError())
    if not (authorize_cluster(context, AclOperation.CREATE)
            or authorize(context, AclOperation.CREATE, ResourceType.TOPIC, name)):
        return _error(name, ZERO_UUID, TopicAuthorizationFailedError())
    return _auto_create(context, name)


def _auto_create(context: RequestContext, name: str) -> MetadataResponseTopic:
    """Propose the topic (broker defaults); while the creation is not committed the answer is
    LEADER_NOT_AVAILABLE, as Kafka's, and the client asks again."""
    proposal = context.broker.controller.create_topics([NewTopic(name)])[0]
    if not proposal.done():
        return _error(name, ZERO_UUID, LeaderNotAvailableError())
    error = refusal(proposal, f"auto-creating topic {name!r}")
    if error is not None:
        if not isinstance(error, InvalidTopicExceptionError):
            logger.info("auto-creation of topic %r failed: %s", name, error)
        return _error(name, ZERO_UUID, error)
    created = context.broker.controller.image.topics_by_name.get(name)
    assert created is not None
    return _describe_hosted(context, created)


def _describe_hosted(context: RequestContext, topic: TopicImage) -> MetadataResponseTopic:
    """A single node whose logs of ``topic`` are still being created on the storage worker
    (issue 18) answers LEADER_NOT_AVAILABLE (retriable), as while its creation is not
    committed: a producer told the leader now would send to a partition that answers
    NOT_LEADER_OR_FOLLOWER, and with acks=0 its records would be lost."""
    return _describe_taken(_take(context, topic))


# What a topic's answer is built from: its name, id and partitions, or None for the partitions
# while its logs are still being created or loaded on one node.
Taken = tuple[str, UUID, "list[tuple[int, PartitionImage]] | None"]


def _take(context: RequestContext, topic: TopicImage) -> Taken:
    """On the loop: the image's partition map changes in place with later deltas (the
    PartitionImages themselves never do), so the answer is built from a copy of it."""
    loading = getattr(context.broker, "quorum", None) is None and (
        context.broker.replica_manager.disk_work_pending(topic.name))
    return topic.name, topic.topic_id, None if loading else list(topic.partitions.items())


def _describe_taken(taken: Taken) -> MetadataResponseTopic:
    name, topic_id, partitions = taken
    if partitions is None:
        return _error(name, topic_id, LeaderNotAvailableError())
    return _describe_partitions(name, topic_id, partitions)


def _describe_partitions(name: str, topic_id: UUID,
                         partitions: Iterable[tuple[int, PartitionImage]]) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=topic_id,
        is_internal=is_internal(name),
        partitions=[
            MetadataResponsePartition(
                error_code=0,
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[],
            )
            for index, state in sorted(partitions)
        ],
    )


class EncodedResponse(ZeroCopyResponse):
    """A response frame encoded before it was handed back (off the loop)."""

    def __init__(self, frame: bytearray) -> None:
        self.frame = frame

    def frame_parts(self, correlation_id: int, header_version: int,
                    api_version: int) -> list[ResponsePart]:
        return [self.frame]


def _all_topics_off_loop(context: RequestContext, response: MetadataResponse,
                         images: list[TopicImage]) -> Awaitable[EncodedResponse]:
    """Take each topic on the loop (``_take``); describe and encode on an executor thread."""
    taken = [_take(context, topic) for topic in images]
    header = context.header
    version = context.api_version
    header_version = response_header_version(header.request_api_key, version)

    def build() -> EncodedResponse:
        response.topics = [_describe_taken(topic) for topic in taken]
        return EncodedResponse(
            encode_response_message(header.correlation_id, header_version, response, version))

    return asyncio.get_running_loop().run_in_executor(None, build)


def _error(name: str | None, topic_id: UUID, error: KafkaError) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=error.code, name=name, topic_id=topic_id)


def error_response(request: MetadataRequest, error: KafkaError) -> MetadataResponse:
    # Kafka's getErrorResponse: "" for a null name, which responses before v12 cannot carry.
    return MetadataResponse(
        topics=[_error(topic.name or "", topic.topic_id, error) for topic in request.topics or ()]
    )


SPEC = register(
    ApiSpec(
        api_key=MetadataRequest.API_KEY,
        min_version=0,
        max_version=MetadataRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Metadata",
    )
)
