"""JoinGroup: v0–v9.

Translates to ``GroupCoordinator.join``; a parked join is answered when the join phase ends
(every member rejoined, the rebalance timeout, or ``group.initial.rebalance.delay.ms`` for a
group starting from Empty). v4+ new members without a group instance id first get
MEMBER_ID_REQUIRED with their member id (KIP-394); v5+ carry static membership
(``group_instance_id``). ``client_host`` is the peer's address, written "/host" as Kafka does.
The member list goes to the leader only. v0 has no rebalance timeout: the session timeout
serves as one, as in Kafka. v0 and v1 are served as Kafka 4.0.1+ serves them again (KAFKA-19444):
librdkafka before 2.11 (Debian's kcat 1.7.1 has 2.0.2) enables consumer groups only if the
broker lists JoinGroup v0.

Not implemented: ``skip_assignment`` (v9, KIP-814: never set, the leader always assigns); the
``reason`` (v8+) is accepted and ignored.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.values import JoinRequest, JoinResponse, Protocol
from protocol.errors import GroupAuthorizationFailedError, KafkaError
from protocol.messages.join_group_request import JoinGroupRequest
from protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember

NULLABLE_PROTOCOL_NAME_VERSION = 7
REBALANCE_TIMEOUT_VERSION = 1
REQUIRE_KNOWN_MEMBER_ID_VERSION = 4
SKIP_ASSIGNMENT_VERSION = 9


def handle(context: RequestContext, request: JoinGroupRequest) -> HandlerResult:
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, GroupAuthorizationFailedError())
    version = context.api_version
    result = context.broker.group_coordinator.join(request.group_id, JoinRequest(
        member_id=request.member_id,
        client_id=context.client_id or "",
        protocol_type=request.protocol_type,
        protocols=tuple(Protocol(p.name, p.metadata) for p in request.protocols),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=(request.session_timeout_ms if version < REBALANCE_TIMEOUT_VERSION
                              else request.rebalance_timeout_ms),
        group_instance_id=request.group_instance_id,
        client_host=client_host(context.connection_id),
        require_known_member_id=version >= REQUIRE_KNOWN_MEMBER_ID_VERSION,
        support_skipping_assignment=version >= SKIP_ASSIGNMENT_VERSION,
    ))
    if isinstance(result, JoinResponse):
        return _response(result, version)
    return _respond_later(result, version)


def client_host(connection_id: str) -> str:
    """Kafka's ``clientHost``: the peer's ``InetAddress.toString()``, "/127.0.0.1"."""
    host = connection_id.rsplit(":", 1)[0]
    return f"/{host}"


async def _respond_later(future: asyncio.Future[JoinResponse], version: int) -> JoinGroupResponse:
    return _response(await future, version)


def _response(response: JoinResponse, version: int) -> JoinGroupResponse:
    protocol_name = response.protocol_name
    if protocol_name is None and version < NULLABLE_PROTOCOL_NAME_VERSION:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=response.error_code,
        generation_id=response.generation_id,
        protocol_type=response.protocol_type,
        protocol_name=protocol_name,
        leader=response.leader,
        skip_assignment=response.skip_assignment,
        member_id=response.member_id,
        members=[
            JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                    metadata=m.metadata)
            for m in response.members
        ],
    )


def error_response(request: JoinGroupRequest, error: KafkaError) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=error.code, generation_id=-1, protocol_name="",
                             leader="", member_id=request.member_id)


SPEC = register(
    ApiSpec(
        api_key=JoinGroupRequest.API_KEY,
        min_version=0,
        max_version=JoinGroupRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="JoinGroup",
    )
)
