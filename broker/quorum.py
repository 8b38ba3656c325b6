"""``QuorumMember``: this node's part in a KRaft cluster (Kafka's ``RaftManager`` plus the
glue of ``ControllerServer`` / ``BrokerServer``), built when ``process.roles`` is set.

Pieces: the metadata log's files (``FileRaftLog``, shared with the metadata loader that the
replica manager listens to), the ``quorum-state`` file next to them, the sans-IO
``RaftNode`` (a voter when this node is in ``controller.quorum.voters``, else an observer),
its asyncio ``RaftDriver``, the node-to-node clients that reach the other controllers' listeners,
and — on controller nodes — the ``QuorumController``.

Flow of a commit: the Raft node raises its high watermark → ``on_high_watermark`` → the
loader applies the newly committed batches to the image and publishes their deltas (the replica
manager creates and deletes logs, takes leader or follower roles) → the controller hears the
applied offset (its pending proposal resolves) → the cluster id, once committed, is written to
every ``meta.properties`` and used in every Raft request.

A peer that answers INCONSISTENT_CLUSTER_ID holds another cluster's data (or this node does):
logged as an error naming both sides, never acted on (the node keeps its own data).

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.lifecycle import BrokerLifecycleManager
from broker.meta_properties import write_cluster_id
from broker.node_client import NodeClients
from broker.raft_driver import RaftDriver
from protocol.codec import Message
from protocol.errors import ErrorCode, KafkaError, UnknownServerError
from protocol.messages.broker_registration_request import Listener as RegisteredListener
from replication.raft.config import RaftConfig
from replication.raft.log import SnapshotId
from replication.raft.messages import top_level_error_response
from replication.raft.node import RaftNode
from replication.raft.quorum_state import FileQuorumStateStore

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["QUORUM_STATE_FILE", "QuorumMember", "quorum_request", "raft_error_response"]

logger = logging.getLogger("samsa.broker.quorum")

QUORUM_STATE_FILE = "quorum-state"
CONTROLLER_CHANNEL_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms for the controller channel
CONTROLLER_TICK_S = 0.25  # how often the active controller looks for expired broker sessions
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class QuorumMember:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        kraft = broker.config.kraft
        metadata_log = broker.replica_manager.metadata_log
        assert metadata_log is not None, "the replica manager starts first"
        self.metadata_log = metadata_log
        quorum = kraft.quorum
        self.raft_config = RaftConfig(
            election_timeout_ms=quorum.election_timeout_ms,
            fetch_timeout_ms=quorum.fetch_timeout_ms,
            election_backoff_max_ms=quorum.election_backoff_max_ms,
            request_timeout_ms=quorum.request_timeout_ms,
            retry_backoff_ms=quorum.retry_backoff_ms,
            append_linger_ms=quorum.append_linger_ms,
        )
        # Two channels to the controllers, as Kafka keeps them (KafkaRaftClient's own network
        # client; the broker's NodeToControllerChannelManager): responses on one connection go
        # out in request order, so a forwarded CreateTopics waiting for its commit must never
        # sit in front of the Fetch that commits it.
        controller_ssl = broker.config.node_ssl_contexts.get(
            next(iter(kraft.controller_listener_names), ""))
        self.clients = NodeClients(
            kraft.controller_endpoint, client_id=f"raft-client-{broker.node_id}",
            request_timeout_ms=quorum.request_timeout_ms, ssl_context=controller_ssl,
        )
        self.controller_channel = NodeClients(
            kraft.controller_endpoint, client_id=f"controller-channel-{broker.node_id}",
            request_timeout_ms=CONTROLLER_CHANNEL_TIMEOUT_MS, ssl_context=controller_ssl,
        )
        # Registration and heartbeats have a channel of their own whose requests time out
        # within half a broker session (Kafka's "heartbeat" channel, KAFKA-14392): a heartbeat
        # stuck on a controller that stopped answering (paused, partitioned away) must give way
        # to the next one, sent to the newly elected controller before this broker's session
        # there expires — else the new controller fences every broker at once.
        self.heartbeat_channel = NodeClients(
            kraft.controller_endpoint, client_id=f"heartbeat-channel-{broker.node_id}",
            request_timeout_ms=max(1, kraft.broker_session_timeout_ms // 2),
            ssl_context=controller_ssl,
        )
        store = FileQuorumStateStore(
            Path(metadata_log.directory) / QUORUM_STATE_FILE,
            voter_ids=sorted(quorum.voter_ids), cluster_id=broker.cluster_id,
        )
        self.node = RaftNode(
            node_id=broker.node_id, voter_ids=quorum.voter_ids, log=metadata_log.raft_log,
            store=store, config=self.raft_config, rng=random.Random(),
            now_ms=broker.clock.milliseconds(), cluster_id=broker.cluster_id or None,
        )
        self.driver = RaftDriver(self.node, send=self._send, clock=broker.clock)
        self._refused_by: set[int] = set()
        self._ticker: asyncio.Task[None] | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self._leading: asyncio.Task[None] | None = None
        self._roles: asyncio.Task[None] | None = None
        self.node.listeners.append(self)

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        self.driver.start()
        loop = asyncio.get_running_loop()
        if self.broker.quorum_controller is not None:
            self._ticker = loop.create_task(self._tick(), name="controller-timers")
        if self.broker.config.kraft.is_broker:
            self.lifecycle = self._lifecycle_manager()
            self.broker.lifecycle = self.lifecycle
            self.lifecycle.start()
            self._roles = loop.create_task(self._take_roles_once_caught_up(self.lifecycle),
                                           name="take-roles-once-caught-up")
            if not self.broker.replica_manager.leadership_allowed:
                self._leading = loop.create_task(self._lead_once_unfenced(self.lifecycle),
                                                 name="lead-once-unfenced")
        else:  # a controller-only node hosts no partition: nothing stale to act on
            self.broker.replica_manager.caught_up()

    async def stop(self) -> None:
        """Controlled shutdown first (leaderships moved away while the quorum still runs),
        then the Raft node resigns and stops."""
        if self.lifecycle is not None:
            timeout_s = self.broker.config.kraft.broker_session_timeout_ms / 1000
            await self.lifecycle.controlled_shutdown(timeout_s)
            await self.lifecycle.stop()
        if self._roles is not None:
            self._roles.cancel()
        if self._leading is not None:
            self._leading.cancel()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        await self.driver.stop()
        await self.clients.close()
        await self.controller_channel.close()
        await self.heartbeat_channel.close()

    async def _take_roles_once_caught_up(self, lifecycle: BrokerLifecycleManager) -> None:
        """A broker takes the partition roles its image names only once it is registered and
        the controller says its metadata caught up (Kafka's ``BrokerServer`` waits for the
        ``initialCatchUpFuture`` before it installs the metadata publishers). Registration is
        refused while the previous incarnation's session lives, and the controller fences that
        session first — taking it out of every ISR and leadership — so a node that restarts
        quickly (with a log cut short, or wiped: found by the fault harness's smoke run, where a
        wiped node led its old partition again with an empty log) never acts on the roles of
        the process that died."""
        await lifecycle.wait_caught_up()
        logger.info("registered and caught up with the metadata: taking partition roles")
        self.broker.replica_manager.caught_up()

    async def _lead_once_unfenced(self, lifecycle: BrokerLifecycleManager) -> None:
        """After an unclean restart (``replication.replica_manager``: "Unclean restarts")."""
        await lifecycle.wait_unfenced()
        self.broker.replica_manager.allow_leadership()

    async def _tick(self) -> None:
        controller = self.broker.quorum_controller
        assert controller is not None
        while True:
            await asyncio.sleep(CONTROLLER_TICK_S)
            controller.tick()

    def _lifecycle_manager(self) -> BrokerLifecycleManager:
        kraft = self.broker.config.kraft
        listeners = [
            RegisteredListener(name=listener.name, host=listener.host, port=listener.port,
                               security_protocol=SECURITY_PROTOCOL_IDS[listener.security_protocol])
            for listener in self.broker.advertised
        ]
        return BrokerLifecycleManager(
            node_id=self.broker.node_id, cluster_id=lambda: self.broker.cluster_id,
            listeners=listeners, rack=kraft.broker_rack, features=[],
            send=self._send_heartbeat, metadata_offset=lambda: self.metadata_offset,
            heartbeat_interval_ms=kraft.broker_heartbeat_interval_ms,
            retry_backoff_ms=kraft.quorum.retry_backoff_ms * 5,
            previous_broker_epoch=self.broker.log_manager.previous_broker_epoch,
        )

    async def _send_heartbeat(self, message: Message) -> Message | None:
        """A registration or heartbeat for the active controller, on the heartbeat channel
        (None: none known, or no answer). Nothing is sent before the cluster id is known (a
        registration must name it)."""
        leader_id = self.node.leader_id
        if leader_id is None or not self.broker.cluster_id:
            return None
        return await self.heartbeat_channel.send_or_none(leader_id, message)

    async def _send(self, destination: int, message: Message) -> Message | None:
        response = await self.clients.send_or_none(destination, message)
        if getattr(response, "error_code", None) == ErrorCode.INCONSISTENT_CLUSTER_ID:
            if destination not in self._refused_by:
                self._refused_by.add(destination)
                logger.error(
                    "node %d refused this node's %s: it belongs to another cluster than this "
                    "node's data (cluster id %r here); this node keeps its data and does not "
                    "join", destination, type(message).__name__, self.node.cluster_id)
            return None
        return response

    # -- the Raft node's listener -------------------------------------------------------------

    def on_leader_change(self, epoch: int, leader_id: int | None) -> None:
        logger.info("metadata quorum epoch %d: leader %s", epoch,
                    "unknown" if leader_id is None else leader_id)
        controller = self.broker.quorum_controller
        if controller is not None:
            controller.on_leader_change(epoch, leader_id, self.node.log.end_offset)

    def on_high_watermark(self, high_watermark: int) -> None:
        loader = self.metadata_log.loader
        if loader.apply_committed():
            self._learn_cluster_id()
            controller = self.broker.quorum_controller
            if controller is not None:
                controller.on_applied(loader.end_offset - 1)

    def on_snapshot_installed(self, snapshot_id: SnapshotId) -> None:
        logger.info("installing metadata snapshot %s from the leader", snapshot_id)
        self.metadata_log.loader.install_snapshot(snapshot_id)
        self._learn_cluster_id()
        controller = self.broker.quorum_controller
        if controller is not None:
            controller.on_applied(self.metadata_log.loader.end_offset - 1)

    def _learn_cluster_id(self) -> None:
        committed = self.metadata_log.image.cluster_id
        if committed is None or committed == self.broker.cluster_id:
            return
        if self.broker.cluster_id:
            logger.error("the committed cluster id %s differs from this node's %s",
                         committed, self.broker.cluster_id)
            return
        write_cluster_id(self.broker.config.log_dirs, committed, self.broker.node_id)
        self.broker.cluster_id = committed
        self.node.cluster_id = committed
        logger.info("cluster id %s recorded in meta.properties", committed)

    # -- observation --------------------------------------------------------------------------

    @property
    def leader_id(self) -> int | None:
        return self.node.leader_id

    @property
    def metadata_offset(self) -> int:
        """The last metadata offset applied to the image (BrokerHeartbeat's)."""
        return self.metadata_log.loader.end_offset - 1


# -- serving the Raft APIs (broker.apis.vote, begin_quorum_epoch, end_quorum_epoch,
#    fetch_snapshot, and Fetch of the metadata partition on a controller listener) -------------


def quorum_request(broker: Broker, request: Message) -> Awaitable[Message] | Message:
    """Hand a Raft request to this node's Raft node; its answer (awaited)."""
    if broker.quorum is None:
        return raft_error_response(request, UnknownServerError(
            "this node is not part of a KRaft cluster (process.roles is not set)"))
    return broker.quorum.driver.handle_request(request)


def raft_error_response(request: Message, error: KafkaError) -> Message:
    """The request's response with a top-level ``error`` and no partitions."""
    return top_level_error_response(request, error.code)
