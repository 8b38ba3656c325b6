"""InitProducerId: v0–v5.

Without a transactional id (an idempotent producer): a new producer id (from blocks of 1000
recorded as ProducerIdsRecords in the metadata log, so ids are never reused across restarts)
with epoch 0, whatever producer id and epoch the request carries. That is Kafka's rule
(``TransactionCoordinator.handleInitProducerId``): an idempotent producer bumps its epoch
itself (KIP-360) and asks for a new id only when it must, so the broker never bumps an epoch
it cannot vouch for.

With a transactional id: the transaction coordinator (``broker.transaction.coordinator``)
gives the id's producer id the next epoch, fencing every older instance: a transaction the
previous epoch left open is aborted with a bumped epoch first, and that call answers
CONCURRENT_TRANSACTIONS (the client retries and gets the next epoch); a transaction being
completed answers CONCURRENT_TRANSACTIONS; ``transaction_timeout_ms`` above
``transaction.max.timeout.ms`` (or not positive) answers INVALID_TRANSACTION_TIMEOUT. v3+ may
carry the producer's current id and epoch (KIP-360): a retry of a bump that succeeded returns
the same epoch; an epoch neither current nor last is PRODUCER_FENCED, answered as
INVALID_PRODUCER_EPOCH below v4 (as Kafka).

An empty transactional id, or a producer id without an epoch (or the reverse), is
INVALID_REQUEST, as in Kafka. Not implemented: two-phase commit (KIP-939, v6).

Authorization (with an authorizer): a transactional id needs WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (Kafka 4), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize, authorize_by_resource_type, authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from broker.replicated_answers import answer_when_replicated, transaction_partition
from protocol.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    TransactionalIdAuthorizationFailedError,
)
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse

PRODUCER_FENCED_VERSION = 4


def handle(context: RequestContext, request: InitProducerIdRequest) -> HandlerResult:
    if request.transactional_id == "":
        return error_response(request, InvalidRequestError("empty transactional id"))
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        return error_response(request, InvalidRequestError(
            "producer id and epoch must be given together"))
    if request.transactional_id is not None:
        if not authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
            return error_response(request, TransactionalIdAuthorizationFailedError())
        return _transactional(context, request, request.transactional_id)
    if not (authorize_cluster(context, AclOperation.IDEMPOTENT_WRITE)
            or authorize_by_resource_type(context, AclOperation.WRITE, ResourceType.TOPIC)):
        return error_response(request, ClusterAuthorizationFailedError())
    producer_ids = context.broker.transactions.producer_ids
    return InitProducerIdResponse(producer_id=producer_ids.generate_producer_id(), producer_epoch=0)


def _transactional(
    context: RequestContext, request: InitProducerIdRequest, transactional_id: str
) -> HandlerResult:
    expected = None
    if request.producer_id != -1:
        expected = (request.producer_id, request.producer_epoch)
    result = context.broker.transactions.coordinator.init_producer_id(
        transactional_id, request.transaction_timeout_ms, expected
    )
    error = result.error
    if error is ErrorCode.PRODUCER_FENCED and context.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    response = InitProducerIdResponse(
        error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch
    )
    return answer_when_replicated(
        context.broker, transaction_partition(context, transactional_id), response,
        lambda code: InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1))


def error_response(request: InitProducerIdRequest, error: KafkaError) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error.code, producer_id=-1, producer_epoch=-1)


SPEC = register(
    ApiSpec(
        api_key=InitProducerIdRequest.API_KEY,
        min_version=0,
        max_version=InitProducerIdRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="InitProducerId",
    )
)
