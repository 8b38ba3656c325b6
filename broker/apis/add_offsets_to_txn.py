"""AddOffsetsToTxn: v0–v4.

Adds the group's ``__consumer_offsets`` partition (``abs(java_hash(group_id)) % partitions``)
to the producer's transaction, as AddPartitionsToTxn would, so that the group's
TxnOffsetCommit may follow and its COMMIT/ABORT marker reaches that partition. Errors: the
coordinator's (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED — below v2 INVALID_PRODUCER_EPOCH —,
CONCURRENT_TRANSACTIONS, INVALID_REQUEST for an empty transactional id).

Not implemented: authorization (TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED never answered).

Authorization (with an authorizer): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import OFFSETS_TOPIC
from broker.replicated_answers import answer_when_replicated, transaction_partition
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse

PRODUCER_FENCED_VERSION = 2


def handle(context: RequestContext, request: AddOffsetsToTxnRequest) -> HandlerResult:
    if not authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    broker = context.broker
    partition = (OFFSETS_TOPIC, broker.offset_store.partition_for(request.group_id))
    error = broker.transactions.coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition]
    )
    if error is ErrorCode.PRODUCER_FENCED and context.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return answer_when_replicated(
        broker, transaction_partition(context, request.transactional_id),
        AddOffsetsToTxnResponse(error_code=error), lambda code: AddOffsetsToTxnResponse(error_code=code))


def error_response(request: AddOffsetsToTxnRequest, error: KafkaError) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=AddOffsetsToTxnRequest.API_KEY,
        min_version=0,
        max_version=AddOffsetsToTxnRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AddOffsetsToTxn",
    )
)
