"""Samsa's admin client: topics, partitions, configs, groups, offsets, records, the cluster, ACLs.

    from samsa.admin import AdminClient, NewTopic, ConfigResource

    with AdminClient(bootstrap_servers="localhost:9092") as admin:
        admin.create_topics([NewTopic("orders", num_partitions=3)])
        admin.alter_configs(ConfigResource("topic", "orders"), {"retention.ms": "86400000"})
        print(admin.describe_topics(["orders"])["orders"].partitions)

``AdminClient`` is blocking: each call runs on the client's own event loop thread
(``samsa._loop.LoopThread``) and returns when the brokers have answered. ``AsyncAdminClient``
is the same API as coroutines, for asyncio programs (use it from one event loop).

Errors: a call raises the Kafka error class of what failed (``TopicAlreadyExistsError``,
``UnknownTopicOrPartitionError``, ``InvalidPartitionsError``, ...) with a message naming the
item ("topic 'orders' already exists"). Calls about several items try every item and then
raise the first failure's class, naming every failed item. Retriable errors (a moved
controller, leader or coordinator, a lost connection) are retried with Kafka's backoff for
up to ``default.api.timeout.ms``; when no broker answers at all, a call fails at once with
``NoBrokersAvailableError`` naming the addresses tried.

Routing follows Kafka's admin client (see ``samsa._admin_topics``, ``samsa._admin_cluster``,
``samsa._admin_groups``, ``samsa._admin_share_groups``, ``samsa._admin_records``, ``samsa._admin_acls``). ACLs use the model
of ``samsa.acl`` (``AclBinding``, ``AclBindingFilter``, ...), re-exported here.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from samsa._admin_acls import AclAdmin
from samsa._admin_cluster import ClusterAdmin
from samsa._admin_groups import GroupAdmin
from samsa._admin_records import RecordsAdmin
from samsa._admin_share_groups import ShareGroupAdmin
from samsa._admin_topics import TopicAdmin
from samsa._admin_types import (
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    MemberDescription,
    NewTopic,
    PartitionSummary,
    QuorumInfo,
    QuorumNode,
    RaftVoterEndpoint,
    ReplicaState,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffset,
    TopicDescription,
)
from samsa._loop import LoopThread
from samsa.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from samsa.config import parse_config
from samsa.share_partitions import SharePartitionState
from samsa.types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AsyncAdminClient",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "NewTopic",
    "PartitionSummary",
    "PatternType",
    "QuorumInfo",
    "QuorumNode",
    "RaftVoterEndpoint",
    "ReplicaState",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffset",
    "TopicDescription",
]

T = TypeVar("T")


class AsyncAdminClient(TopicAdmin, ClusterAdmin, ShareGroupAdmin, GroupAdmin, RecordsAdmin,
                       AclAdmin):
    """The admin API as coroutines (the methods are documented on ``AdminClient``)."""

    async def __aenter__(self) -> AsyncAdminClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class AdminClient:
    """The blocking admin client. ``config``: Kafka's client config names (``bootstrap.servers``,
    ``client.id``, ``request.timeout.ms``, ``default.api.timeout.ms``, ...); keyword
    arguments may spell them with underscores."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = parse_config("admin", config, settings)
        # A call's outer bound: its retries stop at default.api.timeout.ms, and the request
        # in flight then has at most request.timeout.ms left.
        self._call_timeout = (self.config["default.api.timeout.ms"]
                              + self.config["request.timeout.ms"]) / 1000
        self._closed = False
        self._loop = LoopThread("samsa-admin")
        self._core = self._loop.run(self._make_core(), 10)

    async def _make_core(self) -> AsyncAdminClient:
        return AsyncAdminClient(self.config)

    def _run(self, call: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self._loop.run(call, self._call_timeout if timeout is None else timeout)

    # --- topics ------------------------------------------------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                      timeout: float | None = None) -> None:
        """Create ``topics``; ``validate_only`` checks without creating; ``timeout`` (s) is
        how long the controller may take."""
        outer = None if timeout is None else timeout + self._call_timeout
        self._run(self._core.create_topics(topics, validate_only=validate_only,
                                           timeout=timeout), outer)

    def delete_topics(self, names: str | Iterable[str]) -> None:
        """Delete the topics ``names`` (their data goes with them)."""
        self._run(self._core.delete_topics(names))

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Every topic's name, sorted; ``include_internal`` adds ``__consumer_offsets``."""
        return self._run(self._core.list_topics(include_internal=include_internal))

    def describe_topics(self, names: str | Iterable[str]) -> dict[str, TopicDescription]:
        """Each topic's id and partitions (leader, replicas, ISR), by name."""
        return self._run(self._core.describe_topics(names))

    def create_partitions(self, counts: Mapping[str, int], *,
                          validate_only: bool = False) -> None:
        """Grow each topic to ``counts[topic]`` partitions in total."""
        self._run(self._core.create_partitions(counts, validate_only=validate_only))

    # --- configs -----------------------------------------------------------------------------

    def describe_configs(self, resources: Sequence[ConfigResource]
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each topic or broker: value, source, default, read-only, sensitive."""
        return self._run(self._core.describe_configs(resources))

    def alter_configs(self, resource: ConfigResource, changes: Mapping[str, str | None], *,
                      validate_only: bool = False) -> None:
        """Set (``{key: value}``) or reset (``{key: None}``) configs of one topic or broker;
        the others stay as they are (IncrementalAlterConfigs)."""
        self._run(self._core.alter_configs(resource, changes, validate_only=validate_only))

    # --- cluster -----------------------------------------------------------------------------

    def describe_cluster(self, *, include_fenced_brokers: bool = False) -> ClusterDescription:
        """The cluster id, the controller's node id and the brokers; ``include_fenced_brokers``
        adds the registered fenced ones, each ``BrokerInfo.fenced`` (DescribeCluster v2)."""
        return self._run(self._core.describe_cluster(
            include_fenced_brokers=include_fenced_brokers))

    def describe_quorum(self) -> QuorumInfo:
        """The KRaft metadata quorum: leader, epoch, high watermark, each voter's and
        observer's log end offset, lag and last fetch / caught-up times, voter endpoints."""
        return self._run(self._core.describe_quorum())

    def summarize_partitions(self, *, include_internal: bool = True) -> PartitionSummary:
        """How many partitions there are, which are under-replicated and which offline."""
        return self._run(self._core.summarize_partitions(include_internal=include_internal))

    # --- groups ------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every consumer group (id, protocol type, state), sorted by id."""
        return self._run(self._core.list_groups())

    def describe_groups(self, group_ids: str | Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (client id, host, assigned partitions) of each group;
        an unknown group has state "Dead"."""
        return self._run(self._core.describe_groups(group_ids))

    def delete_groups(self, group_ids: str | Iterable[str]) -> None:
        """Delete groups that have no members, with their committed offsets."""
        self._run(self._core.delete_groups(group_ids))

    def list_group_offsets(self, group_id: str,
                           partitions: Iterable[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them, or of ``partitions``)."""
        return self._run(self._core.list_group_offsets(group_id, partitions))

    def alter_group_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> None:
        """Commit ``offsets`` for a group that has no members (as Kafka's admin client)."""
        self._run(self._core.alter_group_offsets(group_id, offsets))

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete the group's committed offsets of ``partitions``."""
        self._run(self._core.delete_group_offsets(group_id, partitions))

    # --- share groups (KIP-932) ---------------------------------------------------------------

    def list_share_groups(self) -> list[GroupListing]:
        """Every share group (id, "share", state), sorted by id."""
        return self._run(self._core.list_share_groups())

    def describe_share_groups(self, group_ids: str | Iterable[str]
                              ) -> dict[str, ShareGroupDescription]:
        """State, epochs, assignor, coordinator and members (client id, host, member epoch,
        subscription, assigned partitions) of each share group."""
        return self._run(self._core.describe_share_groups(group_ids))

    def describe_share_group_offsets(self, group_id: str,
                                     partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, SharePartitionOffset]:
        """The share group's start offset and lag of each partition (all, or ``partitions``)."""
        return self._run(self._core.describe_share_group_offsets(group_id, partitions))

    def describe_share_partitions(self, group_id: str,
                                  partitions: Iterable[TopicPartition] | None = None
                                  ) -> dict[TopicPartition, SharePartitionState]:
        """Samsa's own: each share partition's in-flight window on its leader (acquired, by
        whom and until when, delivery counts, dead-lettering; archived, dead-lettered and
        expired counts)."""
        return self._run(self._core.describe_share_partitions(group_id, partitions))

    def alter_share_group_offsets(self, group_id: str,
                                  offsets: Mapping[TopicPartition, int]) -> None:
        """Set the share group's start offsets (it must have no members)."""
        self._run(self._core.alter_share_group_offsets(group_id, offsets))

    def delete_share_group_offsets(self, group_id: str, topics: str | Iterable[str]) -> None:
        """Forget the share group's start offsets of ``topics`` (it must have no members)."""
        self._run(self._core.delete_share_group_offsets(group_id, topics))

    def delete_share_groups(self, group_ids: str | Iterable[str]) -> None:
        """Delete share groups that have no members, with their start offsets."""
        self._run(self._core.delete_share_groups(group_ids))

    # --- offsets and records -----------------------------------------------------------------

    def list_offsets(self, specs: Mapping[TopicPartition, int | str], *,
                     isolation_level: str = "read_uncommitted"
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by spec: "earliest", "latest", "max-timestamp" or a timestamp in ms
        (``OffsetAndTimestamp(-1, -1)`` when no record matches)."""
        return self._run(self._core.list_offsets(specs, isolation_level=isolation_level))

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Delete records below ``before[tp]`` (-1: all); the new low watermarks."""
        return self._run(self._core.delete_records(before))

    # --- ACLs --------------------------------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create the ACLs ``bindings`` (one that exists already is left as it is)."""
        self._run(self._core.create_acls(bindings))

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY
                      ) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (all of them by default)."""
        return self._run(self._core.describe_acls(acl_filter))

    def delete_acls(self, filters: Iterable[AclBindingFilter]
                    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs each filter matches; what each filter deleted."""
        return self._run(self._core.delete_acls(filters))

    # --- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections and stop the loop thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._core.close(), 10)
        finally:
            self._loop.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
