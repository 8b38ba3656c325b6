"""The broker's shared state, as handlers see it: config, storage, partitions, sessions, the
one append entry point (``appender``), the fetch purgatory with its timer (``fetch_reaper``)
and the high-watermark checkpoint files.

Built and started by ``broker.daemon``; every field is owned by the event loop. Handlers reach
it through ``RequestContext.broker``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from broker.apis import BROKER_LISTENER, listener_type
from broker.auth.authorizer import Authorizer, parse_super_users
from broker.config import BrokerConfig, Listener, endpoint_for
from broker.config_admin import dynamic_log_config
from broker.controller_router import ControllerRouter
from broker.coordinator_partitions import coordinator_elections
from broker.fetch_session import FetchSessionCache
from broker.forwarding import FORWARDABLE_API_KEYS, Forwarder
from broker.group.coordinator import GroupCoordinator
from broker.group.loading import OffsetsLoader
from broker.group.offsets import OFFSETS_TOPIC, OffsetsConfig, OffsetStore
from broker.group_commit import GroupCommit
from broker.meta_properties import load_cluster_id, random_uuid
from broker.node_client import NodeClients
from broker.purgatory_reaper import PurgatoryReaper
from broker.replicated_answers import call_when_replicated
from broker.replication import ReplicationService
from broker.share.coordinator_config import SHARE_GROUP_STATE_TOPIC
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.memory_persister import MemorySharePersister
from broker.share.partition_manager import SharePartitionManager
from broker.share.persister import SharePersister
from broker.transaction.service import TransactionService
from broker.transaction.state_log import TRANSACTION_STATE_TOPIC
from replication.append import ReplicaAppender
from replication.controller.local import LocalController
from replication.controller.quorum import QuorumController
from replication.events import EVENTS
from replication.high_watermark_checkpoint import HighWatermarkCheckpoints
from replication.isr import IsrChange
from replication.metadata.bootstrap import read_bootstrap
from replication.metadata.delta import LocalReplicaChanges
from replication.metadata.group_config import share_settings
from replication.metadata.image import MetadataImage, TopicImage
from replication.partition import Partition
from replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from replication.replica_manager import ReplicaManager
from storage.clock import Clock
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager

if TYPE_CHECKING:
    from broker.lifecycle import BrokerLifecycleManager
    from broker.metrics import RequestMetrics
    from broker.quorum import QuorumMember

__all__ = ["Broker"]

logger = logging.getLogger("samsa.broker")

UNKNOWN_CLUSTER_ID = ""


@dataclass
class Broker:
    config: BrokerConfig
    clock: Clock
    log_manager: LogManager
    replica_manager: ReplicaManager
    # every metadata write: replication.controller (one node), or through the quorum (KRaft)
    controller: LocalController | ControllerRouter
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    offset_store: OffsetStore
    offsets_loader: OffsetsLoader
    transactions: TransactionService
    appender: ReplicaAppender
    fetch_reaper: PurgatoryReaper[DelayedOperation]
    produce_reaper: PurgatoryReaper[DelayedOperation]
    high_watermark_checkpoints: HighWatermarkCheckpoints
    cluster_id: str = ""  # UNKNOWN_CLUSTER_ID until meta.properties (or the quorum) says
    advertised: tuple[Listener, ...] = ()
    stopping: bool = False
    storage_executor: Executor | None = None  # set by the daemon: where fsyncs run
    metrics: RequestMetrics | None = None  # set by the daemon when metrics.port is on
    authorizer: Authorizer | None = None  # authorizer.class.name set: broker.auth
    # KRaft (process.roles set): this node's Raft node and shell, its controller when it is a
    # controller, the forwarding of admin requests to the active controller, its registration.
    quorum: QuorumMember | None = None
    quorum_controller: QuorumController | None = None
    forwarder: Forwarder | None = None
    lifecycle: BrokerLifecycleManager | None = None
    # KRaft brokers: follower fetchers, ISR changes (AlterPartition), the ISR shrink check
    replication: ReplicationService | None = None
    # flush.messages: the flushes appends wait for, one round per log dir (group commit)
    group_commit: GroupCommit = field(default_factory=GroupCommit, repr=False)
    # share groups: ShareFetch/ShareAcknowledge's share partitions (set by create)
    share_partitions: SharePartitionManager | None = field(default=None, repr=False)
    _moved: dict[tuple[str, int], None] = field(default_factory=dict, repr=False)
    # share groups (KIP-932): the share coordinator over __share_group_state, and the one
    # persister the share partitions' leaders and the group coordinator use (broker.share;
    # Broker.create sets the network persister, the memory one is for brokers built in tests)
    share_coordinator: ShareCoordinatorService | None = None
    share_persister: SharePersister = field(default_factory=MemorySharePersister, repr=False)

    @classmethod
    def create(cls, config: BrokerConfig, *, clock: Clock) -> Broker:
        log_manager = LogManager(
            list(config.log_dirs),
            default_config=config.log_config,
            clock=clock,
            recovery_threads_per_dir=config.num_recovery_threads_per_data_dir,
            cleaner_dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
            segment_open_files_max=config.log_segment_open_files_max,
            verify_on_startup=config.samsa_log_verify_on_startup,
        )
        EVENTS.node_id = config.node_id
        replica_manager = ReplicaManager(
            log_manager,
            node_id=config.node_id,
            clock=clock,
            metadata_log_config=config.metadata_log_config,
        )
        quorum_controller: QuorumController | None = None
        controller: LocalController | ControllerRouter
        if config.kraft.is_kraft:
            if config.kraft.is_controller:
                quorum_controller = QuorumController(
                    node_id=config.node_id, default_num_partitions=config.num_partitions,
                    default_replication_factor=config.default_replication_factor,
                    default_config=lambda: log_manager.default_config,
                    image=lambda: replica_manager.image, clock_ms=clock.milliseconds,
                    # a formatted node (samsa storage format) brings its id, else a new one
                    new_cluster_id=lambda: broker.cluster_id or random_uuid(),
                    session_timeout_ms=config.kraft.broker_session_timeout_ms,
                    leader_imbalance_check_interval_ms=(
                        config.kraft.leader_imbalance_check_interval_seconds * 1000
                        if config.kraft.auto_leader_rebalance_enable else None),
                    leader_imbalance_per_broker_percentage=(
                        config.kraft.leader_imbalance_per_broker_percentage),
                    unclean_leader_election_interval_ms=(
                        config.kraft.unclean_leader_election_interval_ms),
                )
            controller = ControllerRouter(
                quorum_controller, image=lambda: replica_manager.image,
                clients=lambda: broker.quorum.controller_channel if broker.quorum else None,
                controller_id=lambda: broker.quorum.leader_id if broker.quorum else None,
            )
        else:
            controller = LocalController(
                node_id=config.node_id,
                default_num_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor,
                default_config=lambda: log_manager.default_config,
            )
        fetch_purgatory = DelayedOperationPurgatory[DelayedOperation]("Fetch", clock=clock)
        appender = ReplicaAppender(replica_manager.partition_or_error,
                                   fetch_purgatory=fetch_purgatory)
        offset_store = OffsetStore(replica_manager, controller, config=offsets_config(config),
                                   clock=clock, appender=appender)
        kraft = config.kraft.is_kraft  # a cluster: the coordinators serve only what this node leads
        group_coordinator = GroupCoordinator(config=config.group_config, clock=clock, store=offset_store,
                                             partition_for=offset_store.partition_for, owns_all=not kraft,
                                             share_store=offset_store)
        group_coordinator.share.settings = lambda group_id: share_settings(
            replica_manager.image, group_id, defaults=config.share_group_defaults)
        broker = cls(
            config=config,
            clock=clock,
            log_manager=log_manager,
            replica_manager=replica_manager,
            controller=controller,
            fetch_sessions=FetchSessionCache(clock=clock),
            group_coordinator=group_coordinator,
            offset_store=offset_store,
            offsets_loader=OffsetsLoader(offset_store, group_coordinator),
            transactions=TransactionService.create(
                config.transaction_config, clock=clock, replica_manager=replica_manager,
                controller=controller, offset_store=offset_store,
                offsets_partition_loading=group_coordinator.is_loading, appender=appender,
                replication_factor=config.kraft.transaction_state_log_replication_factor if kraft else 1,
                min_insync_replicas=config.kraft.transaction_state_log_min_isr if kraft else None,
                owns_all=not kraft,
            ),
            appender=appender,
            fetch_reaper=PurgatoryReaper(fetch_purgatory),
            produce_reaper=PurgatoryReaper(appender.produce_purgatory),
            high_watermark_checkpoints=HighWatermarkCheckpoints(log_manager),
            advertised=config.advertised_listeners,
            quorum_controller=quorum_controller,
        )
        if config.authorizer_class_name:
            broker.authorizer = Authorizer(
                lambda: replica_manager.image.acls,
                super_users=parse_super_users(config.super_users),
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
        replica_manager.on_topics_deleted.append(broker._forget_topics)
        broker.share_partitions = broker._share_partition_manager()
        replica_manager.on_role_changes.append(broker.share_partitions.role_changed)
        group_coordinator.share.on_members_removed.append(broker.share_partitions.members_removed)
        # coordinators wait (LOAD_IN_PROGRESS) while their internal partition is being created
        group_coordinator.partitions.pending = offset_store.partition_pending
        broker.transactions.coordinator.partitions.pending = broker.transactions.state_log.partition_pending
        if kraft:
            replica_manager.on_local_changes.append(broker._coordinator_elections)
        if kraft and config.kraft.is_broker:
            broker.replication = ReplicationService(broker)
            replica_manager.on_role_changes.append(broker.replication.role_changed)
            replica_manager.on_local_changes.append(broker._partitions_stopped)
        replica_manager.resolve_default_config = broker._dynamic_log_config
        broker.transactions.coordinator.after_replication = broker._after_transaction_replicated
        broker._create_share_coordinator()
        return broker

    def _create_share_coordinator(self) -> None:
        from broker.share.network_persister import NetworkSharePersister

        config, kraft = self.config.share_coordinator_config, self.config.kraft.is_kraft
        self.share_coordinator = ShareCoordinatorService(
            config, replica_manager=self.replica_manager, controller=self.controller,
            appender=self.appender, clock=self.clock,
            # a single node: one replica and the broker's min.insync.replicas, as the other
            # internal topics (the cluster's values are not capped: see the service)
            replication_factor=config.state_topic_replication_factor if kraft else 1,
            min_insync_replicas=config.state_topic_min_isr if kraft else None,
            owns_all=not kraft)
        self.share_coordinator.attach(self)
        self.replica_manager.on_topics_deleted.append(self.share_coordinator.topics_deleted)
        self.share_persister = NetworkSharePersister.for_broker(self.share_coordinator, self)
    def _share_partition_manager(self) -> SharePartitionManager:
        """ShareFetch/ShareAcknowledge's share partitions (``broker.share.partition_manager``)."""
        from broker.share.dead_letters import DeadLetterAppender
        from replication.metadata.group_config import share_settings

        def topic_name(topic_id: UUID) -> str | None:
            image = self.replica_manager.topic_by_id(topic_id)
            return None if image is None else image.name

        return SharePartitionManager(
            persister=lambda: self.share_persister,
            partition_of=self.replica_manager.partition_or_error,
            topic_name=topic_name,
            settings_of=lambda group_id: share_settings(
                self.replica_manager.image, group_id, defaults=self.config.share_group_defaults),
            clock=self.clock,
            wake=lambda topic, index: self.appender.fetch_purgatory.check_and_complete((topic, index)),
            max_sessions=int(self.config.properties["group.share.max.share.sessions"]),
            append_dead_letters=DeadLetterAppender(self),
        )

    def _after_transaction_replicated(self, transactional_id: str, then: Callable[[], None]) -> None:
        key = (TRANSACTION_STATE_TOPIC, self.transactions.state_log.partition_for(transactional_id))
        call_when_replicated(self, key, then)

    def startup(self) -> None:
        """Load logs, replay metadata, open partitions (synchronous: before serving). The
        ``__consumer_offsets`` partitions are only marked as loading here: the daemon loads
        them in the background once the listeners are open (``offsets_loader``)."""
        cluster_id = load_cluster_id(self.config.log_dirs, self.config.node_id,
                                     kraft=self.config.kraft.is_kraft)
        self.cluster_id = cluster_id or UNKNOWN_CLUSTER_ID  # KRaft: learnt from the quorum
        self.log_manager.startup(  # the internal topics' logs now, the others maybe later
            background_above=self.config.samsa_log_background_load_above,
            load_now=lambda topic: topic.startswith("__"))
        self.replica_manager.high_watermark_checkpoints = self.high_watermark_checkpoints.read()
        self.replica_manager.startup(
            quorum=self.config.kraft.is_kraft,
            hold_leadership=self.config.kraft.is_broker and not isinstance(
                self.controller, LocalController))
        # New partitions start at 0; a log still loading keeps its entry until it is hosted.
        unloaded = self.log_manager.unloaded
        self.replica_manager.high_watermark_checkpoints = {
            key: offset for key, offset in self.replica_manager.high_watermark_checkpoints.items()
            if key in unloaded}
        assert self.replica_manager.metadata_log is not None
        metadata_log = self.replica_manager.metadata_log
        bootstrap = read_bootstrap(Path(metadata_log.directory).parent)
        if isinstance(self.controller, LocalController):
            self.controller.start(metadata_log)
            self.controller.write_bootstrap(bootstrap)
        else:
            if self.quorum_controller is not None:
                self.quorum_controller.bootstrap = bootstrap
            self._join_quorum()
        if self.quorum is None:  # a cluster loads what this node leads as it is elected
            self.offsets_loader.schedule()
            self.transactions.load()  # before serving: no COORDINATOR_LOAD_IN_PROGRESS window
            if self.share_coordinator is not None:
                self.share_coordinator.load()

    def _join_quorum(self) -> None:
        """KRaft: the Raft node over the metadata log just opened (started by the daemon)."""
        from broker.quorum import QuorumMember  # the quorum imports the broker's API modules

        quorum = self.quorum = QuorumMember(self)
        if self.quorum_controller is not None:
            self.quorum_controller.quorum = quorum.driver
        self.forwarder = Forwarder(quorum.controller_channel, lambda: quorum.leader_id)
        self.transactions.send_remote_markers(NodeClients(
            self.inter_broker_endpoint, client_id=f"broker-{self.node_id}",
            request_timeout_ms=self.config.kraft.quorum.request_timeout_ms,
            ssl_context=self.config.node_ssl_contexts.get(
                self.config.kraft.inter_broker_listener_name)))

    def inter_broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where broker ``node_id`` listens for other brokers (``inter.broker.listener.name``
        in its registration), None when it is not registered there."""
        registration = self.replica_manager.image.brokers.by_id.get(node_id)
        name = self.config.kraft.inter_broker_listener_name.upper()
        for endpoint in () if registration is None else registration.listeners:
            if endpoint.name == name:
                return endpoint.host, endpoint.port
        return None

    @property
    def controller_id(self) -> int:
        """The active controller as clients are told (Metadata, DescribeCluster): the quorum's
        leader in KRaft (-1 while none is known), this node on a single node."""
        if self.quorum is None:
            return self.node_id
        leader_id = self.quorum.leader_id
        return -1 if leader_id is None else leader_id

    def live_brokers(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of each broker clients may use, at its endpoint for the
        client's listener: every registered, unfenced broker in KRaft (Kafka's alive brokers),
        this node on a single node."""
        if self.quorum is None:
            return [(self.node_id, listener.host, listener.port, None)
                    for listener in endpoint_for(self.advertised, listener_name)]
        live = []
        for registration in sorted(self.replica_manager.image.brokers.by_id.values(),
                                   key=lambda registration: registration.broker_id):
            if registration.fenced:
                continue
            for endpoint in registration.listeners:
                if endpoint.name == listener_name.upper():
                    live.append((registration.broker_id, endpoint.host, endpoint.port,
                                 registration.rack))
        return live

    def forwarder_for(self, api_key: int, listener_name: str) -> Forwarder | None:
        """KRaft's forwarding: an admin request on a broker listener goes to the active
        controller unless this node is it (None: handle it here)."""
        if self.forwarder is None or api_key not in FORWARDABLE_API_KEYS:
            return None
        if listener_type(self.config, listener_name) != BROKER_LISTENER:
            return None
        if self.quorum_controller is not None and self.quorum_controller.active:
            return None
        return self.forwarder

    def shutdown(self) -> None:
        self.group_commit.close()  # a round under way ends before the logs close
        self.checkpoint_high_watermarks()
        # the clean-shutdown marker holds this incarnation's broker epoch, as Kafka's does
        self.log_manager.shutdown(-1 if self.lifecycle is None else self.lifecycle.broker_epoch)

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's ``checkpointHighWatermarks``: scheduled, and at a clean stop."""
        self.high_watermark_checkpoints.write(self.replica_manager.high_watermarks())

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def flush_until(self, log: Log, offset: int) -> asyncio.Future[None]:
        """``flush.messages`` reached: a future done once ``log`` is fsynced below ``offset``
        (``broker.group_commit``); it fails with KAFKA_STORAGE_ERROR if the sync failed. A
        caller may drop it: the failure is logged by the flusher either way."""
        future = self.group_commit.flush(log, offset)
        future.add_done_callback(_retrieve)
        return future

    def high_watermarks_moved(self, keys: Iterable[tuple[str, int]]) -> None:
        """Partitions' high watermarks (or a follower's log) moved, or their leadership did:
        the delayed produces and fetches on them are checked right after the current callback
        (never from inside another purgatory's check). Before the loop runs (start-up) nothing
        is waiting."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if not self._moved:
            loop.call_soon(self._complete_moved)
        self._moved.update(dict.fromkeys(keys))

    def _complete_moved(self) -> None:
        keys, self._moved = list(self._moved), {}
        self.appender.try_complete_delayed(*keys)

    def propose_isr_change(self, partition: Partition, change: IsrChange) -> None:
        """An ISR change ``partition`` (led here) wants: to the controller (AlterPartition)."""
        if self.replication is not None:
            self.replication.submit(partition, change)
        else:  # a single node has no followers to change: nothing can be pending
            partition.isr_change_failed(change)

    def _partitions_stopped(self, changes: LocalReplicaChanges) -> None:
        """Partitions this node no longer hosts are no longer fetched."""
        assert self.replication is not None
        for key in changes.deletes:
            self.replication.fetchers.removed(key)

    def _coordinator_elections(self, changes: LocalReplicaChanges) -> None:
        """A cluster's delta: the coordinators take the internal partitions this node leads
        now and give up those it follows or lost (Kafka's ``BrokerMetadataPublisher`` calling
        ``onElection`` / ``onResignation``)."""
        for topic, elect, resign in (
            (OFFSETS_TOPIC, self.offsets_loader.elect, self.offsets_loader.resign),
            (TRANSACTION_STATE_TOPIC, self.transactions.elect, self.transactions.resign),
            *(() if self.share_coordinator is None else (
                (SHARE_GROUP_STATE_TOPIC, self.share_coordinator.elect, self.share_coordinator.resign),)),
        ):
            elections = coordinator_elections(changes, topic)
            for index, leader_epoch in elections.elected:
                elect(index, leader_epoch)
            for index, resigned_epoch in elections.resigned:
                resign(index, resigned_epoch)

    def _dynamic_log_config(self, image: MetadataImage) -> LogConfig:
        """The topic defaults: static config with the dynamic broker configs of ``image``."""
        return dynamic_log_config(self.config, image, self.config.node_id)

    def _forget_topics(self, topics: list[TopicImage]) -> None:
        self.fetch_sessions.remove_topics({t.topic_id for t in topics}, {t.name for t in topics})
        for topic in topics:  # long polls on a deleted partition answer UNKNOWN_TOPIC_OR_PARTITION
            for index in topic.partitions:
                self.appender.try_complete_delayed((topic.name, index))


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark a dropped flush future's failure as seen (the flusher logged it)."""
    if not future.cancelled():
        future.exception()


def offsets_config(config: BrokerConfig) -> OffsetsConfig:
    kraft = config.kraft
    return OffsetsConfig(
        replication_factor=kraft.offsets_topic_replication_factor if kraft.is_kraft else 1,
        num_partitions=config.offsets_topic_num_partitions,
        segment_bytes=config.offsets_topic_segment_bytes,
        retention_ms=config.offsets_retention_minutes * 60_000,
        metadata_max_bytes=config.offset_metadata_max_bytes,
    )
