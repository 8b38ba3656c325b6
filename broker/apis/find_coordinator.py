"""FindCoordinator: v0–v6.

Key type GROUP (0): this node is the coordinator of every group (a single node leads every
``__consumer_offsets`` partition), at the advertised endpoint of the client's listener. Key type TRANSACTION (1):
likewise this node, the transaction coordinator of every transactional id (it leads every
``__transaction_state`` partition; the topic is created at the first InitProducerId). Any
other key type (SHARE in Kafka 4): INVALID_REQUEST. v0–v3 ask for one ``key`` and get
top-level fields (v0: a group, no key type, no error message); v4+ batch ``coordinator_keys``
and get one ``coordinators`` entry per key (KIP-699). v0 is served as Kafka 4 serves it:
librdkafka before 2.11 (Debian's kcat 1.7.1 has 2.0.2) finds group coordinators only if the
broker lists FindCoordinator v0.

Not implemented: creating ``__consumer_offsets`` before answering (Kafka answers
COORDINATOR_NOT_AVAILABLE until it exists); the group coordinator here does not need it.

Authorization (with an authorizer): DESCRIBE on the group / transactional id, else
GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.config import endpoint_for
from protocol.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    TransactionalIdAuthorizationFailedError,
)
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
BATCHED_VERSION = 4


def handle(context: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if context.api_version < BATCHED_VERSION:
        found = _coordinator(context, request.key, request.key_type)
        return FindCoordinatorResponse(
            error_code=found.error_code, error_message=found.error_message,
            node_id=found.node_id, host=found.host, port=found.port,
        )
    return FindCoordinatorResponse(coordinators=[
        _coordinator(context, key, request.key_type) for key in request.coordinator_keys
    ])


def _coordinator(context: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return _failed(key, InvalidRequestError(f"unknown coordinator key type {key_type}"))
    if key_type == GROUP_KEY_TYPE and not authorize(
        context, AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        return _failed(key, GroupAuthorizationFailedError())
    if key_type == TRANSACTION_KEY_TYPE and not authorize(
        context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _failed(key, TransactionalIdAuthorizationFailedError())
    broker = context.broker
    endpoint = endpoint_for(broker.advertised, context.listener_name)
    if not endpoint:
        return _failed(key, CoordinatorNotAvailableError("no advertised listener"))
    listener = endpoint[0]
    return Coordinator(key=key, node_id=broker.node_id, host=listener.host, port=listener.port,
                       error_code=0, error_message=None)


def _failed(key: str, error: KafkaError) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error.code,
                       error_message=error.message or None)


def error_response(request: FindCoordinatorRequest, error: KafkaError) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(
        error_code=error.code, error_message=error.message or None, node_id=-1, host="", port=-1,
        coordinators=[_failed(key, error) for key in request.coordinator_keys],
    )


SPEC = register(
    ApiSpec(
        api_key=FindCoordinatorRequest.API_KEY,
        min_version=0,
        max_version=FindCoordinatorRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="FindCoordinator",
    )
)
