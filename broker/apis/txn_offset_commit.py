"""TxnOffsetCommit: v0–v4.

A transactional producer's ``send_offsets_to_transaction``: the group's offsets go into its
``__consumer_offsets`` partition as one transactional batch (the producer's id and epoch) and
stay pending — invisible to OffsetFetch — until the transaction's COMMIT marker reaches that
partition (``broker.group.transactional_offsets``); an ABORT drops them.

Checks, in Kafka's order (``GroupCoordinatorService.commitTransactionalOffsets`` and
``OffsetMetadataManager.commitTransactionalOffset``): an empty group id → INVALID_GROUP_ID;
the transaction must hold the group's offsets partition (AddOffsetsToTxn first): else
INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH (fenced), CONCURRENT_TRANSACTIONS, or
TRANSACTION_ABORTABLE (below v4: INVALID_TXN_STATE) — checked only where this node's
transaction coordinator owns the transactional id (in a cluster another broker may: no remote
verification yet, as for Produce); a loading partition →
COORDINATOR_LOAD_IN_PROGRESS (below v2: COORDINATOR_NOT_AVAILABLE); the group: none and
generation -1 creates a simple group, none otherwise → ILLEGAL_GENERATION; an existing group
validates member and generation, except that a commit without member id, generation and
instance id (v0–v2 clients) is accepted unless the group is rebalancing (Kafka's
``ClassicGroup.validateOffsetCommit`` for transactional commits). Those errors go to every
partition. Per partition: an unknown topic → UNKNOWN_TOPIC_OR_PARTITION, metadata over
``offset.metadata.max.bytes`` → OFFSET_METADATA_TOO_LARGE. A failed append → the mapped
coordinator error.

Not implemented: authorization, quotas.

Authorization (with an authorizer): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED),
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import OFFSETS_TOPIC, OffsetAndMetadata, coordinator_error_code
from broker.group.values import GroupState
from broker.replicated_answers import answer_when_replicated
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
)
from protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

logger = logging.getLogger("samsa.broker.apis.txn_offset_commit")

LOAD_IN_PROGRESS_VERSION = 2
TRANSACTION_ABORTABLE_VERSION = 4


def handle(context: RequestContext, request: TxnOffsetCommitRequest) -> HandlerResult:
    if not authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return error_response(request, ErrorCode.INVALID_GROUP_ID)
    error = _verify_transaction(context, request)
    if error is None:
        error = context.broker.group_coordinator.partition_error(request.group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and (
            context.api_version < LOAD_IN_PROGRESS_VERSION
        ):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error is None:
        error = _validate_group(context, request)
    if error is not None:
        return error_response(request, error)
    response = TxnOffsetCommitResponse()
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    now_ms = context.broker.clock.milliseconds()
    readable = filter_authorized(context, AclOperation.READ, ResourceType.TOPIC,
                                 [topic.name for topic in request.topics])
    for topic in request.topics:
        answers = TxnOffsetCommitResponseTopic(name=topic.name)
        known = context.broker.replica_manager.topic_by_name(topic.name) is not None
        for partition in topic.partitions:
            code = (_check(context, known, partition) if topic.name in readable
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if code is ErrorCode.NONE:
                accepted[(topic.name, partition.partition_index)] = _offset(partition, now_ms)
            answers.partitions.append(TxnOffsetCommitResponsePartition(
                partition_index=partition.partition_index, error_code=code))
        response.topics.append(answers)
    _store(context, request, accepted, response)
    key = (OFFSETS_TOPIC, context.broker.offset_store.partition_for(request.group_id))
    return answer_when_replicated(context.broker, key, response,
                                  lambda code: error_response(request, code))


def _verify_transaction(context: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode | None:
    """The group's offsets partition must be in the producer's open transaction."""
    broker = context.broker
    coordinator = broker.transactions.coordinator
    if coordinator.ownership_error(request.transactional_id) is ErrorCode.NOT_COORDINATOR:
        # A cluster: another broker coordinates the transactional id. Kafka asks it
        # (AddPartitionsToTxn verify_only); not built yet, so the commit goes on unverified,
        # as a transactional Produce does (broker.apis.produce).
        return None
    partition = (OFFSETS_TOPIC, broker.offset_store.partition_for(request.group_id))
    verified = coordinator.verify_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition]
    )[partition]
    if verified is ErrorCode.NONE:
        return None
    if verified is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if verified is ErrorCode.TRANSACTION_ABORTABLE and (
        context.api_version < TRANSACTION_ABORTABLE_VERSION
    ):
        return ErrorCode.INVALID_TXN_STATE
    return verified


def _validate_group(context: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode | None:
    broker = context.broker
    coordinator = broker.group_coordinator
    group = coordinator.get_group(request.group_id)
    if group is None:
        if request.generation_id < 0:
            coordinator.get_or_create_group(request.group_id)  # a simple group
            return None
        return ErrorCode.ILLEGAL_GENERATION
    anonymous = (request.generation_id < 0 and not request.member_id
                 and request.group_instance_id is None)
    if anonymous:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None
    error: ErrorCode | None = group.validate_offset_commit(
        request.member_id, request.generation_id, request.group_instance_id,
        now_ms=broker.clock.monotonic_ms(),
    )
    return error


def _check(context: RequestContext, known: bool, partition: TxnOffsetCommitRequestPartition) -> ErrorCode:
    if not known:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    metadata = partition.committed_metadata
    if metadata is not None and len(metadata) > context.broker.offset_store.config.metadata_max_bytes:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    return ErrorCode.NONE


def _offset(partition: TxnOffsetCommitRequestPartition, now_ms: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        committed_offset=partition.committed_offset,
        leader_epoch=partition.committed_leader_epoch,
        metadata=partition.committed_metadata or "",
        commit_timestamp_ms=now_ms,
    )


def _store(
    context: RequestContext, request: TxnOffsetCommitRequest,
    accepted: dict[tuple[str, int], OffsetAndMetadata], response: TxnOffsetCommitResponse,
) -> None:
    """Append; on failure, give every accepted partition the mapped error."""
    try:
        context.broker.offset_store.commit_transactional(
            request.group_id, request.producer_id, request.producer_epoch, accepted
        )
        return
    except KafkaError as error:
        logger.warning("transactional offsets of group %s failed: %s", request.group_id, error)
        code = ErrorCode(coordinator_error_code(error))
    except Exception:
        logger.exception("transactional offsets of group %s failed", request.group_id)
        code = ErrorCode.UNKNOWN_SERVER_ERROR
    for topic in response.topics:
        for answer in topic.partitions:
            if (topic.name, answer.partition_index) in accepted:
                answer.error_code = code


def error_response(request: TxnOffsetCommitRequest, error: KafkaError | int) -> TxnOffsetCommitResponse:
    code = error if isinstance(error, int) else error.code
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in topic.partitions
        ])
        for topic in request.topics
    ])


SPEC = register(
    ApiSpec(
        api_key=TxnOffsetCommitRequest.API_KEY,
        min_version=0,
        max_version=TxnOffsetCommitRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="TxnOffsetCommit",
    )
)
