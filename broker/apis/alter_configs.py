"""AlterConfigs: v0–v2 (the legacy API: each resource's dynamic configs replaced as a whole).

Per resource, as Kafka's ``ConfigAdminManager`` and ``ConfigurationControlManager``: a resource
named twice -> INVALID_REQUEST "Each resource must appear at most once."; a key given twice or a
null value -> INVALID_REQUEST; TOPIC: the given configs become the topic's whole set (keys not
given are deleted: ConfigRecords with a null value), checked by ``LogConfig`` -> INVALID_CONFIG
with the key, value and reason, a missing topic -> UNKNOWN_TOPIC_OR_PARTITION; BROKER ("" or
this node's id): the given configs become that level's whole dynamic set, checked as Kafka's
dynamic broker configs -> INVALID_REQUEST (see ``broker.config_admin``); GROUP (a group id):
the group's whole set, checked by ``replication.metadata.group_config``. The records are fsynced
in the metadata log and the live logs take the new config at once; ``validate_only`` checks
everything and writes nothing.

Not implemented: BROKER_LOGGER (Kafka rejects it here too) and CLIENT_METRICS resources
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
from broker.config_admin import alter_each, alter_resource, check_alter_request
from protocol.errors import KafkaError
from protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from replication.controller.proposal import Proposal
from replication.metadata.config_control import legacy_changes


def handle(
    context: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse | Awaitable[AlterConfigsResponse]:
    return alter_each(request.resources,
                      lambda resource: _alter(context, resource, request.validate_only),
                      _result, lambda results: AlterConfigsResponse(responses=results))


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
            [config.name for config in resource.configs if config.value is None],
        )
        configs = {config.name: config.value or "" for config in resource.configs}
        return alter_resource(
            context.broker, resource.resource_type, resource.resource_name,
            lambda current: legacy_changes(current, configs), validate_only=validate_only,
        )
    except Exception as error:  # a Kafka refusal, or UNKNOWN_SERVER_ERROR logged by ``refusal``
        return Proposal.refused(error)


def _result(
    resource: AlterConfigsResource, error: KafkaError | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=0 if error is None else error.code,
        error_message=None if error is None else error.message or None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def error_response(request: AlterConfigsRequest, error: KafkaError) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[_result(r, error) for r in request.resources])


SPEC = register(
    ApiSpec(
        api_key=AlterConfigsRequest.API_KEY,
        min_version=0,
        max_version=AlterConfigsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterConfigs",
    )
)
