"""EndQuorumEpoch: v0–v1 (controller listeners only): a resigning leader asks the voters to elect a successor.

The request goes to this node's Raft node (``broker.quorum``), which answers it; the answer is
awaited here. A node that is not part of a KRaft cluster (no ``process.roles``) has no quorum
to answer with: UNKNOWN_SERVER_ERROR, as Kafka's controller answers an API it cannot serve.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.quorum import quorum_request, raft_error_response
from protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest


def handle(context: RequestContext, request: EndQuorumEpochRequest) -> HandlerResult:
    return quorum_request(context.broker, request)


SPEC = register(
    ApiSpec(
        api_key=EndQuorumEpochRequest.API_KEY,
        min_version=0,
        max_version=EndQuorumEpochRequest.MAX_VERSION,
        handle=handle,
        error_response=raft_error_response,
        name="EndQuorumEpoch",
    )
)
