"""FindCoordinator: v0–v6.

Key type GROUP (0): the coordinator of a group is the leader of its ``__consumer_offsets``
partition (``partition_for``); key type TRANSACTION (1): the leader of the transactional id's
``__transaction_state`` partition; key type SHARE (2, v6+, KIP-932): the share coordinator of a
share partition, the leader of its ``__share_group_state`` partition, the key being
``"<group id>:<topic id>:<partition>"`` (``broker.share.coordinator_key``: Kafka's text form of
the topic id, Kafka's partition rule); a malformed key, or SHARE below v6: INVALID_REQUEST. Any
other key type: INVALID_REQUEST.
v0–v3 ask for one ``key`` and get top-level fields (v0: a group, no key type, no error
message); v4+ batch ``coordinator_keys`` and get one ``coordinators`` entry per key (KIP-699).
v0 is served as Kafka 4 serves it: librdkafka before 2.11 (Debian's kcat 1.7.1 has 2.0.2)
finds group coordinators only if the broker lists FindCoordinator v0.

A single node (no ``process.roles``) leads every internal partition: the answer is this node at
the advertised endpoint of the client's listener. As Kafka does, the internal topic is created
here if it is missing (through the controller; ``offsets.topic.num.partitions`` /
``transaction.state.log.num.partitions``), and, unlike Kafka (which answers
COORDINATOR_NOT_AVAILABLE meanwhile), the answer waits until its partitions' logs exist (they
are created on the storage worker, issue 18), so a client's first OffsetCommit, JoinGroup or
InitProducerId after it finds the partition hosted. A creation that is refused or still queued
is logged and the answer given at once; the first write then answers COORDINATOR_NOT_AVAILABLE
(retriable).

A cluster, as Kafka's ``KafkaApis.getCoordinator``: the internal topic missing from this node's
metadata image → its creation is asked of the active controller (Kafka's
``AutoTopicCreationManager``: ``offsets.topic.num.partitions`` /
``transaction.state.log.num.partitions`` partitions, replication factor
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor``, not capped:
the controller refuses more replicas than registered brokers, and the next FindCoordinator asks
again) and the answer is COORDINATOR_NOT_AVAILABLE (retriable); the partition without a leader,
or its leader not a live (registered, unfenced) broker with an endpoint for the client's
listener → COORDINATOR_NOT_AVAILABLE; else that broker's endpoint. Every node answers the same
from the same image.

Authorization (with an authorizer): DESCRIBE on the group / transactional id, else
GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED; key type SHARE (asked by
brokers): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from broker.commits import when_committed
from broker.config import endpoint_for
from broker.group.offsets import OFFSETS_TOPIC
from broker.share.coordinator_config import SHARE_GROUP_STATE_TOPIC
from broker.share.coordinator_key import parse_coordinator_key
from broker.transaction.state_log import TRANSACTION_STATE_TOPIC
from protocol.errors import (
    ClusterAuthorizationFailedError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    TransactionalIdAuthorizationFailedError,
)
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse

logger = logging.getLogger("samsa.broker.apis.find_coordinator")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
SHARE_MIN_VERSION = 6
BATCHED_VERSION = 4
NO_LEADER = -1


def handle(
    context: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse | Awaitable[FindCoordinatorResponse]:
    if context.api_version < BATCHED_VERSION:
        found = _coordinator(context, request.key, request.key_type)
        response = FindCoordinatorResponse(
            error_code=found.error_code, error_message=found.error_message,
            node_id=found.node_id, host=found.host, port=found.port,
        )
        coordinators = [found]
    else:
        coordinators = [_coordinator(context, key, request.key_type)
                        for key in request.coordinator_keys]
        response = FindCoordinatorResponse(coordinators=coordinators)
    broker = context.broker
    if getattr(broker, "quorum", None) is not None or not any(
            found.error_code == 0 for found in coordinators):
        return response
    topic = _create_internal_topic(context, request.key_type)
    if topic is None:
        return response
    return when_committed((), lambda: response,
                          settled=lambda: broker.replica_manager.settled([topic]))


def _create_internal_topic(context: RequestContext, key_type: int) -> str | None:
    """A single node: create the key type's internal topic unless it exists; its name (None:
    a test double without coordinators)."""
    broker = context.broker
    if key_type == GROUP_KEY_TYPE:
        store = getattr(broker, "offset_store", None)
        topic, create = OFFSETS_TOPIC, None if store is None else store.ensure_topic
    elif key_type == SHARE_KEY_TYPE:
        share = getattr(broker, "share_coordinator", None)
        topic, create = SHARE_GROUP_STATE_TOPIC, None if share is None else share.ensure_topic
    else:
        transactions = getattr(broker, "transactions", None)
        topic = TRANSACTION_STATE_TOPIC
        create = None if transactions is None else transactions.state_log.ensure_topic
    if create is None:
        return None
    try:
        create()
    except KafkaError as error:
        logger.info("creating %s: %s", topic, error)
    return topic


def _coordinator(context: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE):
        return _failed(key, InvalidRequestError(f"unknown coordinator key type {key_type}"))
    if key_type == SHARE_KEY_TYPE:
        if context.api_version < SHARE_MIN_VERSION:
            return _failed(key, InvalidRequestError(
                f"key type SHARE needs FindCoordinator v{SHARE_MIN_VERSION}+"))
        if not authorize_cluster(context, AclOperation.CLUSTER_ACTION):
            return _failed(key, ClusterAuthorizationFailedError())
        try:
            parse_coordinator_key(key)
        except KafkaError as error:
            return _failed(key, error)
    if key_type == GROUP_KEY_TYPE and not authorize(
        context, AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        return _failed(key, GroupAuthorizationFailedError())
    if key_type == TRANSACTION_KEY_TYPE and not authorize(
        context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _failed(key, TransactionalIdAuthorizationFailedError())
    broker = context.broker
    if getattr(broker, "quorum", None) is not None:  # a cluster (test doubles have no quorum)
        return _cluster_coordinator(context, key, key_type)
    endpoint = endpoint_for(broker.advertised, context.listener_name)
    if not endpoint:
        return _failed(key, CoordinatorNotAvailableError("no advertised listener"))
    listener = endpoint[0]
    return Coordinator(key=key, node_id=broker.node_id, host=listener.host, port=listener.port,
                       error_code=0, error_message=None)


def _cluster_coordinator(context: RequestContext, key: str, key_type: int) -> Coordinator:
    broker = context.broker
    if key_type == GROUP_KEY_TYPE:
        topic, index = OFFSETS_TOPIC, broker.offset_store.partition_for(key)
        create = broker.offset_store.ensure_topic
    elif key_type == SHARE_KEY_TYPE:
        share = broker.share_coordinator
        if share is None:
            return _failed(key, CoordinatorNotAvailableError("no share coordinator on this node"))
        topic, index = SHARE_GROUP_STATE_TOPIC, share.partition_for(parse_coordinator_key(key))
        create = share.ensure_topic
    else:
        state_log = broker.transactions.state_log
        topic, index = TRANSACTION_STATE_TOPIC, state_log.partition_for(key)
        create = state_log.ensure_topic
    image = broker.replica_manager.image
    found = image.topics_by_name.get(topic)
    if found is None:
        try:
            create()
        except KafkaError as error:
            logger.info("creating %s: %s", topic, error)
        return _failed(key, CoordinatorNotAvailableError(f"{topic} is being created"))
    partition = found.partitions.get(index)
    leader = NO_LEADER if partition is None else partition.leader
    for node_id, host, port, _ in broker.live_brokers(context.listener_name):
        if node_id == leader:
            return Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=0,
                               error_message=None)
    return _failed(key, CoordinatorNotAvailableError(
        f"{topic}-{index} has no live leader (leader {leader})"))


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
