"""DescribeCluster: v0–v2.

The cluster id, the controller and the brokers at their endpoint for the client's listener
(``Broker.live_brokers``: on a single node this node, without a rack; in KRaft every
registered, unfenced broker). v1 ``endpoint_type``: BROKER (1) is served; CONTROLLER (2) ->
MISMATCHED_ENDPOINT_TYPE, any other value -> UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at
v0), as Kafka's ``AuthHelper.computeDescribeClusterResponse``.

v2 (KIP-1073): ``include_fenced_brokers`` lists every registered broker of the metadata image,
fenced ones too, each with ``is_fenced`` (a broker with no endpoint on the client's listener is
left out, as from the unfenced list). ``is_fenced`` is never set below v2: the field does not
exist there.

Authorization (with an authorizer): ``include_cluster_authorized_operations`` answers the
cluster's allowed operations' bitfield (0 without DESCRIBE on the cluster).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import NOT_REQUESTED_OPERATIONS, authorize_cluster, authorized_operations
from broker.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    MismatchedEndpointTypeError,
    UnsupportedEndpointTypeError,
)
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)

if TYPE_CHECKING:
    from broker.broker import Broker

BROKER_ENDPOINT_TYPE = 1
CONTROLLER_ENDPOINT_TYPE = 2


def handle(context: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    if request.endpoint_type != BROKER_ENDPOINT_TYPE:
        return error_response(request, _endpoint_error(context.api_version, request.endpoint_type))
    broker = context.broker
    operations = NOT_REQUESTED_OPERATIONS
    if request.include_cluster_authorized_operations:
        operations = (
            authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorize_cluster(context, AclOperation.DESCRIBE) else 0
        )
    return DescribeClusterResponse(
        endpoint_type=BROKER_ENDPOINT_TYPE,
        cluster_authorized_operations=operations,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        brokers=_brokers(context, request),
    )


def _brokers(context: RequestContext, request: DescribeClusterRequest
             ) -> list[DescribeClusterBroker]:
    broker = context.broker
    if request.include_fenced_brokers and broker.quorum is not None:
        return _registered_brokers(context.broker, context.listener_name)
    return [DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=rack)
            for node_id, host, port, rack in broker.live_brokers(context.listener_name)]


def _registered_brokers(broker: Broker, listener_name: str) -> list[DescribeClusterBroker]:
    """Every registration in the image, fenced or not, at its endpoint named ``listener_name``."""
    registrations = sorted(broker.replica_manager.image.brokers.by_id.values(),
                           key=lambda registration: registration.broker_id)
    return [
        DescribeClusterBroker(broker_id=registration.broker_id, host=endpoint.host,
                              port=endpoint.port, rack=registration.rack,
                              is_fenced=registration.fenced)
        for registration in registrations
        for endpoint in registration.listeners
        if endpoint.name == listener_name.upper()
    ]


def _endpoint_error(version: int, endpoint_type: int) -> KafkaError:
    if endpoint_type != CONTROLLER_ENDPOINT_TYPE:
        message = f"Unsupported endpoint type {endpoint_type}"
        return InvalidRequestError(message) if version == 0 else UnsupportedEndpointTypeError(message)
    message = (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
        "CONTROLLER"
    )
    return InvalidRequestError(message) if version == 0 else MismatchedEndpointTypeError(message)


def error_response(request: DescribeClusterRequest, error: KafkaError) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=error.code, error_message=error.message or None)


SPEC = register(
    ApiSpec(
        api_key=DescribeClusterRequest.API_KEY,
        min_version=0,
        max_version=DescribeClusterRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeCluster",
    )
)
