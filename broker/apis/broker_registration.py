"""BrokerRegistration: v0–v4 (controller listeners only; KIP-631).

A broker registers with the active controller when it starts: the controller checks the
cluster id, the incarnation id (a new process of a registered broker replaces the old one),
and commits a RegisterBrokerRecord whose offset is the broker's new epoch
(``replication.controller.cluster_control``). Any other node answers NOT_CONTROLLER.

Not implemented: finalized feature levels are not checked (none are recorded); log
directories (JBOD, KIP-858) are recorded as sent, not used.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError, NotControllerError
from protocol.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.messages.broker_registration_response import BrokerRegistrationResponse


def handle(context: RequestContext, request: BrokerRegistrationRequest) -> HandlerResult:
    controller = context.broker.quorum_controller
    if controller is None:
        return error_response(request, NotControllerError())
    proposal = controller.register_broker(request)

    def respond() -> BrokerRegistrationResponse:
        error = refusal(proposal, f"registering broker {request.broker_id}")
        if error is not None:
            return error_response(request, error)
        return BrokerRegistrationResponse(broker_epoch=proposal.result())

    return when_committed([proposal], respond)


def error_response(request: BrokerRegistrationRequest, error: KafkaError) -> BrokerRegistrationResponse:
    return BrokerRegistrationResponse(error_code=error.code, broker_epoch=-1)


SPEC = register(
    ApiSpec(
        api_key=BrokerRegistrationRequest.API_KEY,
        min_version=0,
        max_version=BrokerRegistrationRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="BrokerRegistration",
    )
)
