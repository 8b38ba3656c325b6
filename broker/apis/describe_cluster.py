"""DescribeCluster: v0–v1.

The cluster id, this node as the controller and as the only broker (at the advertised endpoint of the client's listener;
no rack). v1 ``endpoint_type``: BROKER (1) is served; CONTROLLER (2) -> MISMATCHED_ENDPOINT_TYPE,
any other value -> UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0), as Kafka's
``AuthHelper.computeDescribeClusterResponse``.

Not implemented: ``broker.rack`` (rack is null), cluster authorized operations (no ACLs: always
the schema's "not requested" value).

Authorization (with an authorizer): ``include_cluster_authorized_operations`` answers the
cluster's allowed operations' bitfield (0 without DESCRIBE on the cluster).
"""

from __future__ import annotations

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
        brokers=[
            DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=rack)
            for node_id, host, port, rack in broker.live_brokers(context.listener_name)
        ],
    )


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
