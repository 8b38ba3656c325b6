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

import logging
import random
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.meta_properties import write_cluster_id
from broker.node_client import NodeClients
from broker.raft_driver import RaftDriver
from protocol.codec import Message
from protocol.errors import ErrorCode, KafkaError, UnknownServerError
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
        self.clients = NodeClients(
            kraft.controller_endpoint, client_id=f"raft-client-{broker.node_id}",
            request_timeout_ms=quorum.request_timeout_ms,
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
        self.node.listeners.append(self)

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        self.driver.start()

    async def stop(self) -> None:
        await self.driver.stop()
        await self.clients.close()

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
