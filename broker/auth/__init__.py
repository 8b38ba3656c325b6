"""Authorization in the request handlers: the checks Kafka's ``AuthHelper`` makes.

Every function takes the request's ``RequestContext`` (its ``principal`` and ``client_host``)
and answers "allowed" at the cost of one attribute check when the broker has no authorizer
(``authorizer.class.name`` unset), as Kafka's ``authorizer.forall``. With one, the decision is
``broker.auth.authorizer.Authorizer``'s (cached per principal, host, operation and resource).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.auth.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, ResourceType, operations_bitfield
from protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)

if TYPE_CHECKING:
    from broker.apis import RequestContext

__all__ = [
    "NOT_REQUESTED_OPERATIONS",
    "acl_api_refusal",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "authorized_operations",
    "config_resource_error",
    "filter_authorized",
]

# Kafka's authorized-operations field when the client did not ask for it (Integer.MIN_VALUE).
NOT_REQUESTED_OPERATIONS = -2147483648


def authorize(context: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    authorizer = context.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(context.principal, context.client_host, operation,
                                resource_type, name)


def authorize_cluster(context: RequestContext, operation: int) -> bool:
    return authorize(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def acl_api_refusal(context: RequestContext, operation: int, operation_name: str,
                    disabled_message: str) -> KafkaError | None:
    """Why a Create/Describe/DeleteAcls request is refused as a whole (Kafka's ``AclApis``):
    ``operation`` not allowed on the cluster, or no authorizer configured; None if neither."""
    if not authorize_cluster(context, operation):
        return ClusterAuthorizationFailedError(
            f"Request is not authorized: {operation_name} on the cluster is required.")
    if context.broker.authorizer is None:
        return SecurityDisabledError(disabled_message)
    return None


def filter_authorized(
    context: RequestContext, operation: int, resource_type: int, names: Iterable[str]
) -> set[str]:
    """The names among ``names`` that ``operation`` is allowed on."""
    authorizer = context.broker.authorizer
    if authorizer is None:
        return set(names)
    return {
        name for name in set(names)
        if authorizer.authorize(context.principal, context.client_host, operation,
                                resource_type, name)
    }


def authorized_operations(context: RequestContext, resource_type: int, name: str) -> int:
    """The allowed operations' bitfield; every supported operation without an authorizer."""
    authorizer = context.broker.authorizer
    if authorizer is None:
        return operations_bitfield({int(op) for op in SUPPORTED_OPERATIONS[resource_type]})
    return authorizer.authorized_operations(context.principal, context.client_host,
                                            resource_type, name)


def authorize_by_resource_type(context: RequestContext, operation: int, resource_type: int) -> bool:
    authorizer = context.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(context.principal, context.client_host,
                                                 operation, resource_type)


# ConfigResource.Type codes (DescribeConfigs / AlterConfigs), Kafka's ``ConfigResource.Type``.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32


def config_resource_error(
    context: RequestContext, resource_type: int, name: str, operation: int
) -> KafkaError | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource, as Kafka's
    ``handleDescribeConfigsRequest`` / ``authorizeConfigResources``: topics on the topic,
    brokers (and broker loggers) on the cluster, groups on the group; None when allowed or when
    the type is not one of those (the handler reports it)."""
    if context.broker.authorizer is None:
        return None
    if resource_type == _CONFIG_TOPIC:
        if not authorize(context, operation, ResourceType.TOPIC, name):
            return TopicAuthorizationFailedError()
    elif resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
        if not authorize_cluster(context, operation):
            return ClusterAuthorizationFailedError()
    elif resource_type == _CONFIG_GROUP and not authorize(
        context, operation, ResourceType.GROUP, name
    ):
        return GroupAuthorizationFailedError()
    return None
