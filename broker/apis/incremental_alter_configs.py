"""IncrementalAlterConfigs: v0–v1.

Per resource, as Kafka's ``ConfigAdminManager`` and ``ConfigurationControlManager``: a resource
named twice -> INVALID_REQUEST "Each resource must appear at most once."; a key given twice ->
INVALID_REQUEST; a null value for anything but DELETE -> INVALID_REQUEST. Operations: SET, DELETE
(the key goes back to its default: a ConfigRecord with a null value), APPEND and SUBTRACT (LIST
configs only, ``cleanup.policy`` / ``log.cleanup.policy``, else INVALID_CONFIG; from the current
value, else the default). TOPIC: the result is checked by ``LogConfig`` -> INVALID_CONFIG with the
key, value and reason, a missing topic -> UNKNOWN_TOPIC_OR_PARTITION; BROKER ("" or this node's
id): checked as Kafka's dynamic broker configs -> INVALID_REQUEST (see ``broker.config_admin``);
GROUP (a group id, KIP-848 group configs): checked by ``replication.metadata.group_config`` ->
INVALID_CONFIG.
The records are fsynced in the metadata log and the live logs take the new config at once;
``validate_only`` checks everything and writes nothing. All of a resource's changes apply, or
none.

Not implemented: BROKER_LOGGER (log levels) and CLIENT_METRICS resources
(INVALID_REQUEST), alter-config policies, ACLs.

Authorization (with an authorizer): ALTER_CONFIGS on the topic, the cluster (broker
resources) or the group, else TOPIC_ / CLUSTER_ / GROUP_AUTHORIZATION_FAILED.

Each change is proposed to the controller (``replication.controller``); the response is sent once
they are committed (at once on a single node).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import config_resource_error
from broker.auth.acl import AclOperation
from broker.config_admin import (
    BROKER_LIST_KEYS,
    TOPIC_LIST_KEYS,
    alter_each,
    alter_resource,
    broker_defaults,
    check_alter_request,
)
from protocol.errors import InvalidRequestError, KafkaError
from protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from replication.controller.proposal import Proposal
from replication.metadata.config_control import (
    DELETE,
    AlterOperation,
    Changes,
    incremental_changes,
)
from replication.metadata.group_config import GROUP_CONFIG_DEFAULTS
from replication.metadata.image import GROUP_RESOURCE_TYPE, TOPIC_RESOURCE_TYPE
from storage.config import LogConfig

BROKER_LOGGER_RESOURCE_TYPE = 8


def handle(
    context: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse | Awaitable[IncrementalAlterConfigsResponse]:
    return alter_each(request.resources,
                      lambda resource: _alter(context, resource, request.validate_only),
                      _result, lambda results: IncrementalAlterConfigsResponse(responses=results))


def _alter(
    context: RequestContext, resource: AlterConfigsResource, validate_only: bool
) -> Proposal[None]:
    denied = config_resource_error(context, resource.resource_type, resource.resource_name,
                                   AclOperation.ALTER_CONFIGS)
    if denied is not None:
        return Proposal.refused(denied)
    try:
        check_alter_request(
            [config.name for config in resource.configs],
            [c.name for c in resource.configs if c.value is None and c.config_operation != DELETE],
        )
        if resource.resource_type == BROKER_LOGGER_RESOURCE_TYPE:
            raise InvalidRequestError("BROKER_LOGGER resources are not supported by Samsa")
        operations = [AlterOperation(c.name, c.config_operation, c.value) for c in resource.configs]
        return alter_resource(
            context.broker, resource.resource_type, resource.resource_name,
            lambda current: _changes(resource.resource_type, current, operations),
            validate_only=validate_only,
        )
    except Exception as error:  # a Kafka refusal, or UNKNOWN_SERVER_ERROR logged by ``refusal``
        return Proposal.refused(error)


def _changes(resource_type: int, current: dict[str, str], operations: list[AlterOperation]) -> Changes:
    if resource_type == TOPIC_RESOURCE_TYPE:
        return incremental_changes(
            current, operations, list_keys=TOPIC_LIST_KEYS, defaults=LogConfig().to_properties()
        )
    if resource_type == GROUP_RESOURCE_TYPE:
        return incremental_changes(
            current, operations, list_keys=(), defaults=GROUP_CONFIG_DEFAULTS
        )
    return incremental_changes(
        current, operations, list_keys=BROKER_LIST_KEYS, defaults=broker_defaults()
    )


def _result(
    resource: AlterConfigsResource, error: KafkaError | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=0 if error is None else error.code,
        error_message=None if error is None else error.message or None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def error_response(
    request: IncrementalAlterConfigsRequest, error: KafkaError
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=[_result(r, error) for r in request.resources])


SPEC = register(
    ApiSpec(
        api_key=IncrementalAlterConfigsRequest.API_KEY,
        min_version=0,
        max_version=IncrementalAlterConfigsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="IncrementalAlterConfigs",
    )
)
