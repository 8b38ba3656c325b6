"""DeleteTopics: v1–v6 (by name; by name or topic id from v6).

Per topic: UNKNOWN_TOPIC_OR_PARTITION (by name) or UNKNOWN_TOPIC_ID (by id) when it does not
exist; INVALID_REQUEST for an internal topic; INVALID_REQUEST when v6 gives both a name and an
id or neither. The RemoveTopicRecord is fsynced in the metadata log before the logs are
deleted, so a crash in between leaves stray logs that the next start-up removes.

Not implemented: quotas (THROTTLING_QUOTA_EXCEEDED), ``delete.topic.enable``.

Authorization (with an authorizer): DELETE on the topic (by id: DESCRIBE too), else
TOPIC_AUTHORIZATION_FAILED.

Each change is proposed to the controller (``replication.controller``); the response is sent once
they are committed and this node's logs of the deleted topics are closed and renamed aside (on
the storage worker, off the loop).
"""

from __future__ import annotations

from collections.abc import Awaitable
from uuid import UUID

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.commits import refusal, when_committed
from protocol.codec import ZERO_UUID
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from protocol.messages.delete_topics_request import DeleteTopicsRequest
from protocol.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from replication.controller.interface import TopicToDelete
from replication.controller.proposal import Proposal
from replication.metadata.image import TopicImage

FIRST_TOPIC_STATE_VERSION = 6


def handle(
    context: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse | Awaitable[DeleteTopicsResponse]:
    outcomes = [(name, topic_id, _propose(context, name, topic_id))
                for name, topic_id in _targets(context.api_version, request)]
    return when_committed(
        [proposal for *_, proposal in outcomes],
        lambda: DeleteTopicsResponse(responses=[_outcome(*outcome) for outcome in outcomes]),
        settled=lambda: context.broker.replica_manager.settled(_deleted_names(outcomes)))


def _deleted_names(outcomes: list[tuple[str | None, UUID, Proposal[TopicImage]]]) -> list[str]:
    """The topics whose deletion was committed: their logs are removed on the storage worker."""
    return [proposal.result().name for *_, proposal in outcomes
            if proposal.done() and proposal.exception() is None]


def _targets(version: int, request: DeleteTopicsRequest) -> list[tuple[str | None, UUID]]:
    if version < FIRST_TOPIC_STATE_VERSION:
        return [(name, ZERO_UUID) for name in request.topic_names]
    return [(topic.name, topic.topic_id) for topic in request.topics]


def _propose(context: RequestContext, name: str | None, topic_id: UUID) -> Proposal[TopicImage]:
    try:
        if (name is None) == (topic_id == ZERO_UUID):
            raise InvalidRequestError("give either a topic name or a topic id")
        _authorize(context, name, topic_id)
    except KafkaError as error:
        return Proposal.refused(error)
    target = TopicToDelete(name=name) if name is not None else TopicToDelete(topic_id=topic_id)
    return context.broker.controller.delete_topics([target])[0]


def _outcome(name: str | None, topic_id: UUID, proposal: Proposal[TopicImage]) -> DeletableTopicResult:
    error = refusal(proposal, f"deleting topic {name!r} ({topic_id})")
    if error is not None:
        return _failed(name, topic_id, error)
    topic = proposal.result()
    return DeletableTopicResult(name=topic.name, topic_id=topic.topic_id, error_code=0)


def _authorize(context: RequestContext, name: str | None, topic_id: UUID) -> None:
    """DELETE on the topic; one named by id needs DESCRIBE first (Kafka's order)."""
    if context.broker.authorizer is None:
        return
    if name is None:
        topic = context.broker.controller.image.topics_by_id.get(topic_id)
        if topic is None:
            return  # UNKNOWN_TOPIC_ID from the deletion itself
        name = topic.name
        if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            raise TopicAuthorizationFailedError()
    if not authorize(context, AclOperation.DELETE, ResourceType.TOPIC, name):
        raise TopicAuthorizationFailedError()


def _failed(name: str | None, topic_id: UUID, error: KafkaError) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=name, topic_id=topic_id, error_code=error.code, error_message=error.message or None
    )


def error_response(request: DeleteTopicsRequest, error: KafkaError) -> DeleteTopicsResponse:
    targets = [(n, ZERO_UUID) for n in request.topic_names] + [
        (t.name, t.topic_id) for t in request.topics
    ]
    return DeleteTopicsResponse(responses=[_failed(n, i, error) for n, i in targets])


SPEC = register(
    ApiSpec(
        api_key=DeleteTopicsRequest.API_KEY,
        min_version=1,
        max_version=DeleteTopicsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteTopics",
    )
)
