"""Admin operations on topics, partitions, configs and the cluster (a mixin of
``AsyncAdminClient``).

Routing, as Kafka's admin client: CreateTopics, DeleteTopics and CreatePartitions go to the
controller named by the metadata (retried on NOT_CONTROLLER after a metadata refresh);
DescribeConfigs and IncrementalAlterConfigs go to the broker a broker resource names, and
topic resources (and the cluster-wide broker defaults, name "") to any broker; Metadata to any
broker. (The cluster's own calls are in ``samsa._admin_cluster``.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from protocol.errors import ErrorCode
from protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_partitions_response import CreatePartitionsResponse
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.delete_topics_response import DeleteTopicsResponse
from protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
)
from protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from protocol.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from samsa._admin_base import (
    ANY_BROKER,
    NOT_CONTROLLER,
    AdminCore,
    failure,
    item_result,
    raise_failures,
    topic_label,
)
from samsa._admin_types import (
    CONFIG_SOURCES,
    RESOURCE_TYPES,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    TopicDescription,
)
from samsa.types import PartitionInfo

__all__ = ["TopicAdmin"]

FIRST_DELETE_BY_ID_VERSION = 6
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
DEFAULT_CONFIG_SOURCE = 5
_TYPE_NAMES = {code: name for name, code in RESOURCE_TYPES.items()}


def _names(names: str | Iterable[str]) -> list[str]:
    return [names] if isinstance(names, str) else list(dict.fromkeys(names))


class TopicAdmin(AdminCore):
    """Topics, partitions, configs."""

    def _timeout_ms(self, timeout: float | None) -> int:
        return self.config["request.timeout.ms"] if timeout is None else int(timeout * 1000)

    async def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                            timeout: float | None = None) -> None:
        """Create ``topics`` (all are tried; the first error is raised, naming each failed one)."""
        await self._bootstrap()
        by_name = {topic.name: topic for topic in reversed(list(topics))}
        timeout_ms = self._timeout_ms(timeout)

        async def send(node_id: int, names: list[str]) -> dict[str, object]:
            request = CreateTopicsRequest(
                topics=[_creatable(by_name[name]) for name in names],
                timeout_ms=timeout_ms, validate_only=validate_only)
            response: CreateTopicsResponse = await self._request(
                node_id, lambda _: request, CreateTopicsRequest)
            return {r.name: item_result(r.error_code, r.error_message) for r in response.topics}

        _, failures = await self._routed(
            [topic.name for topic in topics], lambda _: self._controller(), send,
            label=topic_label, retry_codes=NOT_CONTROLLER, what="CreateTopics")
        raise_failures(failures)

    async def delete_topics(self, names: str | Iterable[str], *,
                            timeout: float | None = None) -> None:
        """Delete the topics ``names``."""
        await self._bootstrap()
        timeout_ms = self._timeout_ms(timeout)

        def build(version: int, batch: list[str]) -> DeleteTopicsRequest:
            if version >= FIRST_DELETE_BY_ID_VERSION:
                return DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in batch],
                                           timeout_ms=timeout_ms)
            return DeleteTopicsRequest(topic_names=batch, timeout_ms=timeout_ms)

        async def send(node_id: int, batch: list[str]) -> dict[str, object]:
            response: DeleteTopicsResponse = await self._request(
                node_id, lambda version: build(version, batch), DeleteTopicsRequest)
            return {r.name or "": item_result(r.error_code, r.error_message)
                    for r in response.responses}

        _, failures = await self._routed(
            _names(names), lambda _: self._controller(), send,
            label=topic_label, retry_codes=NOT_CONTROLLER, what="DeleteTopics")
        raise_failures(failures)

    async def create_partitions(self, counts: Mapping[str, int], *,
                                validate_only: bool = False) -> None:
        """Raise each topic's partition count to ``counts[topic]`` (new total, increase only)."""
        await self._bootstrap()

        async def send(node_id: int, batch: list[str]) -> dict[str, object]:
            request = CreatePartitionsRequest(
                topics=[CreatePartitionsTopic(name=n, count=counts[n], assignments=None)
                        for n in batch],
                timeout_ms=self.config["request.timeout.ms"], validate_only=validate_only)
            response: CreatePartitionsResponse = await self._request(
                node_id, lambda _: request, CreatePartitionsRequest)
            return {r.name: item_result(r.error_code, r.error_message) for r in response.results}

        _, failures = await self._routed(
            list(counts), lambda _: self._controller(), send,
            label=topic_label, retry_codes=NOT_CONTROLLER, what="CreatePartitions")
        raise_failures(failures)

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """The names of every topic, sorted (``__consumer_offsets`` only if asked)."""
        await self._bootstrap()
        await self.cluster.retrying(lambda: self.cluster.refresh_metadata(None), what="Metadata")
        return sorted(name for name, info in self.cluster.topics.items()
                      if include_internal or not info.is_internal)

    async def describe_topics(self, names: str | Iterable[str]) -> dict[str, TopicDescription]:
        """Partitions (leader, replicas, ISR) of each of ``names``."""
        await self._bootstrap()
        wanted = _names(names)
        if not wanted:
            return {}
        response: MetadataResponse = await self.cluster.retrying(
            lambda: self.cluster.refresh_metadata(wanted), what="Metadata")
        found: dict[str, TopicDescription] = {}
        errors: dict[str, int] = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            if topic.error_code and topic.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                errors[topic.name] = topic.error_code
                continue
            found[topic.name] = _description(topic)
        raise_failures(failure(topic_label(name), errors.get(
            name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)) for name in wanted if name not in found)
        return {name: found[name] for name in wanted}

    # --- configs -----------------------------------------------------------------------------

    @staticmethod
    def _config_destination(resource: ConfigResource) -> int:
        if resource.type == "broker" and resource.name:
            try:
                return int(resource.name)
            except ValueError:
                raise ValueError(f"a broker config resource is named by its node id, "
                                 f"not {resource.name!r}") from None
        return ANY_BROKER

    async def _config_route(self, resource: ConfigResource) -> int:
        node_id = self._config_destination(resource)
        if node_id != ANY_BROKER and node_id not in self.cluster.brokers:
            await self.cluster.refresh_metadata([])
            if node_id not in self.cluster.brokers:
                raise failure(str(resource), ErrorCode.BROKER_NOT_AVAILABLE,
                              "no such broker in the cluster").error
        return node_id

    async def describe_configs(self, resources: Sequence[ConfigResource]
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each resource, by name (value, source, defaults, flags)."""
        await self._bootstrap()
        for resource in resources:
            self._config_destination(resource)

        async def send(node_id: int, batch: list[ConfigResource]) -> dict[ConfigResource, object]:
            request = DescribeConfigsRequest(resources=[
                DescribeConfigsResource(resource_type=RESOURCE_TYPES[r.type],
                                        resource_name=r.name, configuration_keys=None)
                for r in batch])
            response: DescribeConfigsResponse = await self._request(
                node_id, lambda _: request, DescribeConfigsRequest)
            return {
                ConfigResource(_TYPE_NAMES.get(result.resource_type, "topic"),
                               result.resource_name):
                item_result(result.error_code, result.error_message,
                            {c.name: _config_entry(c) for c in result.configs})
                for result in response.results if result.resource_type in _TYPE_NAMES}

        results, failures = await self._routed(
            resources, self._config_route, send, label=str, retry_codes=frozenset(),
            what="DescribeConfigs")
        raise_failures(failures)
        return {resource: results[resource] for resource in resources}

    async def alter_configs(self, resource: ConfigResource,
                            changes: Mapping[str, str | None], *,
                            validate_only: bool = False) -> None:
        """Set configs of ``resource`` (a value) or delete them (None: back to the default),
        through IncrementalAlterConfigs; the other configs are left as they are."""
        await self._bootstrap()
        self._config_destination(resource)
        entries = [AlterableConfig(name=key, config_operation=DELETE if value is None else SET,
                                   value=None if value is None else str(value))
                   for key, value in changes.items()]

        async def send(node_id: int, batch: list[ConfigResource]) -> dict[ConfigResource, object]:
            request = IncrementalAlterConfigsRequest(resources=[
                AlterConfigsResource(resource_type=RESOURCE_TYPES[r.type], resource_name=r.name,
                                     configs=entries) for r in batch], validate_only=validate_only)
            response: IncrementalAlterConfigsResponse = await self._request(
                node_id, lambda _: request, IncrementalAlterConfigsRequest)
            return {r: item_result(reply.error_code, reply.error_message)
                    for r, reply in zip(batch, response.responses, strict=False)}

        _, failures = await self._routed(
            [resource], self._config_route, send, label=str, retry_codes=frozenset(),
            what="IncrementalAlterConfigs")
        raise_failures(failures)


def _creatable(topic: NewTopic) -> CreatableTopic:
    return CreatableTopic(
        name=topic.name, num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        configs=[CreatableTopicConfig(name=k, value=None if v is None else str(v))
                 for k, v in topic.configs.items()])


def _description(topic: MetadataResponseTopic) -> TopicDescription:
    partitions = sorted(
        (PartitionInfo(topic.name or "", p.partition_index, p.leader_id, p.leader_epoch,
                       tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas),
                       p.error_code)
         for p in topic.partitions), key=lambda p: p.partition)
    return TopicDescription(topic.name or "", str(topic.topic_id), topic.is_internal,
                            tuple(partitions))


def _config_entry(config: DescribeConfigsResourceResult) -> ConfigEntry:
    source = CONFIG_SOURCES.get(config.config_source, "UNKNOWN")
    is_default = config.is_default or config.config_source == DEFAULT_CONFIG_SOURCE
    return ConfigEntry(config.name, config.value, source, is_default, config.read_only,
                       config.is_sensitive)
