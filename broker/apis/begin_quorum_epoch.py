"""BeginQuorumEpoch: v0–v1 (controller listeners only): a new leader announces its epoch to the voters.

The request goes to this node's Raft node (``broker.quorum``), which answers it; the answer is
awaited here. A node that is not part of a KRaft cluster (no ``process.roles``) has no quorum
to answer with: UNKNOWN_SERVER_ERROR, as Kafka's controller answers an API it cannot serve.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.quorum import quorum_request, raft_error_response
from protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest


def handle(context: RequestContext, request: BeginQuorumEpochRequest) -> HandlerResult:
    return quorum_request(context.broker, request)


SPEC = register(
    ApiSpec(
        api_key=BeginQuorumEpochRequest.API_KEY,
        min_version=0,
        max_version=BeginQuorumEpochRequest.MAX_VERSION,
        handle=handle,
        error_response=raft_error_response,
        name="BeginQuorumEpoch",
    )
)
