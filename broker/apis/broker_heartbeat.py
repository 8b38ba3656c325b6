"""BrokerHeartbeat: v0–v1 (controller listeners only; KIP-631).

Every ``broker.heartbeat.interval.ms`` a registered broker tells the active controller the
metadata offset it has applied and whether it wants to be fenced (still catching up) or to
shut down. The controller keeps its session (fenced after ``broker.session.timeout.ms``
without one), unfences it once it has caught up with its own registration, and in a
controlled shutdown moves its leaderships away before answering ``should_shut_down``
(``replication.controller.cluster_control``). Any other node answers NOT_CONTROLLER.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError, NotControllerError
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse


def handle(context: RequestContext, request: BrokerHeartbeatRequest) -> HandlerResult:
    controller = context.broker.quorum_controller
    if controller is None:
        return error_response(request, NotControllerError())
    proposal = controller.broker_heartbeat(request)

    def respond() -> BrokerHeartbeatResponse:
        error = refusal(proposal, f"the heartbeat of broker {request.broker_id}")
        if error is not None:
            return error_response(request, error)
        plan = proposal.result()
        return BrokerHeartbeatResponse(is_caught_up=plan.is_caught_up, is_fenced=plan.is_fenced,
                                       should_shut_down=plan.should_shut_down)

    return when_committed([proposal], respond)


def error_response(request: BrokerHeartbeatRequest, error: KafkaError) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(error_code=error.code, is_caught_up=False, is_fenced=True,
                                   should_shut_down=False)


SPEC = register(
    ApiSpec(
        api_key=BrokerHeartbeatRequest.API_KEY,
        min_version=0,
        max_version=BrokerHeartbeatRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="BrokerHeartbeat",
    )
)
