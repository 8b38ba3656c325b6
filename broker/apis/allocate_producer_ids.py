"""AllocateProducerIds: v0–v0 (controller listeners only; KIP-730).

A broker that has handed out its block of producer ids asks the active controller for the
next one; the controller commits a ProducerIdsRecord and answers the block. Any other node
answers NOT_CONTROLLER. Kafka checks the broker's epoch against its registration (STALE_BROKER_EPOCH);
Samsa's brokers do not yet send theirs, so it is not checked.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError, NotControllerError
from protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse


def handle(context: RequestContext, request: AllocateProducerIdsRequest) -> HandlerResult:
    controller = context.broker.quorum_controller
    if controller is None or not controller.active:
        return error_response(request, NotControllerError())
    proposal = controller.allocate_producer_ids(request.broker_id, request.broker_epoch)

    def respond() -> AllocateProducerIdsResponse:
        error = refusal(proposal, f"producer ids for broker {request.broker_id}")
        if error is not None:
            return error_response(request, error)
        block = proposal.result()
        return AllocateProducerIdsResponse(producer_id_start=block.first_producer_id,
                                           producer_id_len=block.size)

    return when_committed([proposal], respond)


def error_response(request: AllocateProducerIdsRequest, error: KafkaError) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(error_code=error.code, producer_id_start=-1, producer_id_len=0)


SPEC = register(
    ApiSpec(
        api_key=AllocateProducerIdsRequest.API_KEY,
        min_version=0,
        max_version=AllocateProducerIdsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AllocateProducerIds",
    )
)
