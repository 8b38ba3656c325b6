"""DescribeConfigs: v1–v4.

Per resource, as Kafka's ``ConfigHelper``:
- TOPIC: every topic config with its effective value and source (DYNAMIC_TOPIC_CONFIG for the
  topic's own, else the broker-wide default's: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
  STATIC_BROKER_CONFIG or DEFAULT_CONFIG); an invalid name -> INVALID_TOPIC_EXCEPTION, a missing
  topic -> UNKNOWN_TOPIC_OR_PARTITION.
- BROKER named by this node's id: every broker config (effective value, source, read-only unless
  dynamically changeable); named "": the cluster-wide dynamic configs only; another id or not a
  number -> INVALID_REQUEST.
- GROUP named by a group id (it need not exist): every group config (``consumer.session.timeout.ms``
  ...), source GROUP_CONFIG for the group's own, else DEFAULT_CONFIG; "" -> INVALID_REQUEST.
``configuration_keys`` (null or empty = all) filters by name; synonyms (by precedence) only when
``include_synonyms``; config types from v3; documentation is always null. Errors are per
resource.

Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST
"Unsupported resource type"), documentation, ACLs.

Authorization (with an authorizer): DESCRIBE_CONFIGS on the topic, the cluster (broker
resources) or the group, else TOPIC_ / CLUSTER_ / GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import config_resource_error
from broker.auth.acl import AclOperation
from broker.config_admin import ConfigEntry, describe_broker, describe_group, describe_topic
from protocol.errors import (
    InvalidRequestError,
    KafkaError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from replication.metadata.controller import validate_topic_name
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    GROUP_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
)

logger = logging.getLogger("samsa.broker.apis.describe_configs")


def handle(context: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[_describe(context, resource, request.include_synonyms) for resource in request.resources]
    )


def _describe(
    context: RequestContext, resource: DescribeConfigsResource, include_synonyms: bool
) -> DescribeConfigsResult:
    denied = config_resource_error(context, resource.resource_type, resource.resource_name,
                                   AclOperation.DESCRIBE_CONFIGS)
    if denied is not None:
        return _failed(resource, denied)
    try:
        entries = _entries(context, resource)
    except KafkaError as error:
        return _failed(resource, error)
    except Exception:
        logger.exception("describing configs of %r failed", resource)
        return _failed(resource, UnknownServerError())
    wanted = set(resource.configuration_keys or ())
    return DescribeConfigsResult(
        error_code=0,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[_result(entry, include_synonyms) for entry in entries if not wanted or entry.name in wanted],
    )


def _entries(context: RequestContext, resource: DescribeConfigsResource) -> list[ConfigEntry]:
    broker = context.broker
    image = broker.replica_manager.image
    name = resource.resource_name
    if resource.resource_type == TOPIC_RESOURCE_TYPE:
        validate_topic_name(name)
        if name not in image.topics_by_name:
            raise UnknownTopicOrPartitionError("")
        return describe_topic(
            broker.config, image, broker.node_id, name,
            default_config=broker.replica_manager.default_config,
        )
    if resource.resource_type == BROKER_RESOURCE_TYPE:
        if name:
            _check_broker_id(name, broker.node_id)
        return describe_broker(broker.config, image, broker.node_id, name)
    if resource.resource_type == GROUP_RESOURCE_TYPE:
        return describe_group(image, name)
    raise InvalidRequestError(f"Unsupported resource type: {resource.resource_type}")


def _check_broker_id(name: str, node_id: int) -> None:
    try:
        requested = int(name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if requested != node_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
        )


def _result(entry: ConfigEntry, include_synonyms: bool) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=False,  # v0 only (below Kafka 4's range): v1+ give config_source
        config_source=entry.source,
        is_sensitive=entry.is_sensitive,
        synonyms=[
            DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
            for s in (entry.synonyms if include_synonyms else ())
        ],
        config_type=entry.config_type,
        documentation=None,
    )


def _failed(resource: DescribeConfigsResource, error: KafkaError) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error.code,
        error_message=error.message or None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[],
    )


def error_response(request: DescribeConfigsRequest, error: KafkaError) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[_failed(r, error) for r in request.resources])


SPEC = register(
    ApiSpec(
        api_key=DescribeConfigsRequest.API_KEY,
        min_version=1,
        max_version=DescribeConfigsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeConfigs",
    )
)
