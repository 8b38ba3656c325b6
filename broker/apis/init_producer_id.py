"""InitProducerId: v0–v5, for idempotent producers only.

A new producer id (from blocks of 1000 recorded as ProducerIdsRecords in the metadata log, so
ids are never reused across restarts) with epoch 0. A request carrying its current id and epoch
(KIP-360) gets the same id with the epoch bumped, or a new id when the epoch would overflow.

Not implemented: transactional ids (COORDINATOR_NOT_AVAILABLE: there is no transaction
coordinator yet), and checking that a bumped producer id was really handed out here.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from protocol.errors import CoordinatorNotAvailableError, KafkaError
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse

MAX_EPOCH = 32767


def handle(context: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id:
        return error_response(request, CoordinatorNotAvailableError(
            "transactions are not supported yet"))
    manager = context.broker.replica_manager
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(
            producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1
        )
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
