"""AddPartitionsToTxn: v0–v5.

v0–v3 come from producers: one transaction (``v3_and_below_*``) whose partitions join the
producer's transaction (the coordinator writes the new partition set to
``__transaction_state`` before answering; partitions already in an Ongoing transaction answer
at once). v4+ come from brokers (KIP-890 part 1) and batch several transactions, each either
added or, with ``verify_only``, only checked: is each partition in the producer's open
transaction? (TRANSACTION_ABORTABLE for one that is not.) On one node the Produce path asks the
coordinator directly, so v4+ is served for completeness.

As Kafka's ``handleAddPartitionsToTxnRequest``: a partition unknown to the metadata
(UNKNOWN_TOPIC_OR_PARTITION) or, from a producer (v0–v3), of an internal topic (Kafka's WRITE
authorization never allows it: TOPIC_AUTHORIZATION_FAILED) fails its whole transaction: the
other partitions answer OPERATION_NOT_ATTEMPTED. Otherwise every partition of a transaction
gets the coordinator's answer: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (below v2:
INVALID_PRODUCER_EPOCH), CONCURRENT_TRANSACTIONS while a transaction completes, or a
coordinator error when the log write failed. v4+ carries a top-level error code (NONE).

Not implemented: authorization (every principal may write every transactional id and topic).

Authorization (with an authorizer): v0–v3 (producers) need WRITE on the transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else TOPIC_AUTHORIZATION_FAILED,
the others OPERATION_NOT_ATTEMPTED); v4+ (brokers) need CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize, authorize_cluster, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.replicated_answers import answer_when_replicated, transaction_partition
from protocol.errors import ClusterAuthorizationFailedError, ErrorCode, KafkaError, error_for_code
from protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from replication.metadata.controller import is_internal

BATCHED_VERSION = 4
PRODUCER_FENCED_VERSION = 2

TopicPartition = tuple[str, int]


def handle(context: RequestContext, request: AddPartitionsToTxnRequest) -> HandlerResult:
    if context.api_version < BATCHED_VERSION:
        transaction = AddPartitionsToTxnTransaction(
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            topics=request.v3_and_below_topics,
        )
        result = _handle_one(context, transaction)
        return answer_when_replicated(
            context.broker, transaction_partition(context, transaction.transactional_id),
            AddPartitionsToTxnResponse(results_by_topic_v3_and_below=result.topic_results),
            lambda code: error_response(request, error_for_code(code)()))
    if not authorize_cluster(context, AclOperation.CLUSTER_ACTION):
        return error_response(request, ClusterAuthorizationFailedError())
    return AddPartitionsToTxnResponse(
        error_code=0,
        results_by_transaction=[_handle_one(context, t) for t in request.transactions],
    )


def _handle_one(
    context: RequestContext, transaction: AddPartitionsToTxnTransaction
) -> AddPartitionsToTxnResult:
    wanted = _partitions(transaction.topics)
    if context.api_version < BATCHED_VERSION and not authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transaction.transactional_id
    ):
        denied = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _result(transaction.transactional_id, denied)
    refused = _refused(context, wanted)
    if refused:
        errors = {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
        return _result(transaction.transactional_id, errors)
    coordinator = context.broker.transactions.coordinator
    if transaction.verify_only:
        verified = coordinator.verify_partitions(
            transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, wanted
        )
        return _result(transaction.transactional_id, verified)
    error = coordinator.add_partitions(
        transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, wanted
    )
    if error is ErrorCode.PRODUCER_FENCED and context.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return _result(transaction.transactional_id, dict.fromkeys(wanted, error))


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((topic.name, index) for topic in topics for index in topic.partitions))


def _refused(context: RequestContext, wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """The partitions that fail the whole transaction (see the module docstring)."""
    manager = context.broker.replica_manager
    from_producer = context.api_version < BATCHED_VERSION
    refused = {}
    writable = filter_authorized(context, AclOperation.WRITE, ResourceType.TOPIC,
                                 [topic for topic, _ in wanted])
    for topic, index in wanted:
        if from_producer and (topic not in writable or is_internal(topic)):
            refused[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif index not in getattr(manager.topic_by_name(topic), "partitions", ()):
            # the metadata image, as Kafka's metadata cache: in a cluster the partition may
            # be led (and hosted) by other brokers
            refused[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return refused


def _result(transactional_id: str, errors: Mapping[TopicPartition, ErrorCode]) -> AddPartitionsToTxnResult:
    topics: dict[str, AddPartitionsToTxnTopicResult] = {}
    for (topic, index), error in errors.items():
        result = topics.setdefault(topic, AddPartitionsToTxnTopicResult(name=topic))
        result.results_by_partition.append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return AddPartitionsToTxnResult(transactional_id=transactional_id, topic_results=list(topics.values()))


def error_response(request: AddPartitionsToTxnRequest, error: KafkaError) -> AddPartitionsToTxnResponse:
    code = ErrorCode(error.code)
    old = _result(request.v3_and_below_transactional_id,
                  dict.fromkeys(_partitions(request.v3_and_below_topics), code))
    return AddPartitionsToTxnResponse(
        error_code=code,
        results_by_topic_v3_and_below=old.topic_results,
        results_by_transaction=[
            _result(t.transactional_id, dict.fromkeys(_partitions(t.topics), code))
            for t in request.transactions
        ],
    )


SPEC = register(
    ApiSpec(
        api_key=AddPartitionsToTxnRequest.API_KEY,
        min_version=0,
        max_version=AddPartitionsToTxnRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AddPartitionsToTxn",
    )
)
