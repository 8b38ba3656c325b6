"""InitProducerId: v0–v5, for idempotent producers only.

A new producer id (from blocks of 1000 recorded as ProducerIdsRecords in the metadata log, so
ids are never reused across restarts) with epoch 0, for every request without a transactional id,
whatever producer id and epoch it carries. That is Kafka's rule (``TransactionCoordinator.
handleInitProducerId``): an idempotent producer bumps its epoch itself (KIP-360) and asks for a
new id only when it must, so the broker never bumps an epoch it cannot vouch for — which could
fence another producer holding that id. An empty transactional id, or a producer id without
an epoch (or the reverse), is INVALID_REQUEST, as in Kafka.

Not implemented: transactional ids (COORDINATOR_NOT_AVAILABLE: there is no transaction
coordinator yet).
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from protocol.errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse


def handle(context: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id == "":
        return error_response(request, InvalidRequestError("empty transactional id"))
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        return error_response(request, InvalidRequestError(
            "producer id and epoch must be given together"))
    if request.transactional_id is not None:
        return error_response(request, CoordinatorNotAvailableError(
            "transactions are not supported yet"))
    manager = context.broker.replica_manager
    return InitProducerIdResponse(producer_id=manager.allocate_producer_id(), producer_epoch=0)


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
