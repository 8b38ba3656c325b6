"""A ``QuorumController`` over a real one-voter ``RaftNode`` and ``MemoryRaftLog``, wired as
``broker.quorum`` wires them (the Raft listener applies committed batches to an image and tells
the controller), stepped by hand: no sockets, no threads, no sleeps.

``run_until(condition)`` polls the Raft node in 1 ms steps of a fake clock; ``commit(proposal)``
runs until a proposal resolves and returns its value. Brokers register and heartbeat through the
controller (``start_brokers``); ``heartbeats(ids)`` keeps sessions alive while time passes.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from replication.controller.interface import NewTopic
from replication.controller.proposal import Proposal
from replication.controller.quorum import QuorumController
from replication.metadata.image import MetadataImage, PartitionImage
from replication.metadata.records import decode_metadata_record
from replication.raft.config import RaftConfig
from replication.raft.log import SnapshotId
from replication.raft.memory_log import MemoryRaftLog
from replication.raft.node import RaftNode
from replication.raft.quorum_state import MemoryQuorumStateStore
from storage.config import LogConfig

T = TypeVar("T")
NODE_ID = 1
CLUSTER_ID = "quorum-controller-test"
SESSION_TIMEOUT_MS = 9000


class QuorumNode:
    def __init__(self, **controller_settings: Any) -> None:
        self.now_ms = 0
        self.log = MemoryRaftLog()
        self.image = MetadataImage()
        self.applied_end = 0  # one past the last offset applied to the image
        self.raft = RaftNode(node_id=NODE_ID, voter_ids=(NODE_ID,), log=self.log,
                             store=MemoryQuorumStateStore(), config=RaftConfig(),
                             rng=random.Random(0), now_ms=0)
        self.controller = QuorumController(
            node_id=NODE_ID, default_num_partitions=1, default_replication_factor=3,
            default_config=LogConfig, image=lambda: self.image, quorum=self,
            clock_ms=lambda: self.now_ms, new_cluster_id=lambda: CLUSTER_ID,
            session_timeout_ms=SESSION_TIMEOUT_MS, **controller_settings)
        self.raft.listeners.append(self)
        self.incarnations: dict[int, uuid.UUID] = {}

    # -- the QuorumClient the controller proposes through -------------------------------------

    def propose_records(self, records: Sequence[bytes]) -> int:
        return self.raft.propose(self.now_ms, records)

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    # -- the Raft listener (broker.quorum.QuorumMember's part) --------------------------------

    def on_leader_change(self, epoch: int, leader_id: int | None) -> None:
        self.controller.on_leader_change(epoch, leader_id, self.log.end_offset)

    def on_high_watermark(self, high_watermark: int) -> None:
        applied = False
        for base_offset, _, values, is_control in self.log.batches_from(self.applied_end):
            for index, value in enumerate(values):
                offset = base_offset + index
                if is_control or value is None or offset < self.applied_end:
                    continue
                record, _ = decode_metadata_record(value)
                self.image.apply(record, offset)
            self.applied_end = base_offset + len(values)
            applied = True
        if applied:
            self.controller.on_applied(self.applied_end - 1)

    def on_snapshot_installed(self, snapshot_id: SnapshotId) -> None:
        raise AssertionError("a single voter never installs a snapshot")

    # -- stepping -----------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        for _ in range(ms):
            self.now_ms += 1
            self.raft.poll(self.now_ms)

    def run_until(self, condition: Callable[[], bool], *, limit_ms: int = 5_000) -> None:
        end = self.now_ms + limit_ms
        while not condition():
            if self.now_ms >= end:
                raise AssertionError(f"condition not reached by {end} ms")
            self.advance(1)

    def commit(self, proposal: Proposal[T]) -> T:
        """Run until ``proposal`` resolves; its value (or raise its error)."""
        self.run_until(proposal.done)
        return proposal.result()

    def start(self) -> QuorumNode:
        self.run_until(lambda: self.controller.active and self.image.cluster_id is not None)
        return self

    # -- brokers ------------------------------------------------------------------------------

    def register(self, broker_id: int) -> int:
        incarnation = self.incarnations.setdefault(broker_id, uuid.uuid4())
        return self.commit(self.controller.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation,
            listeners=[Listener("PLAINTEXT", f"broker{broker_id}", 9092, 0)])))

    def heartbeat(self, broker_id: int) -> None:
        epoch = self.image.brokers.by_id[broker_id].epoch
        self.commit(self.controller.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=epoch,
            current_metadata_offset=self.applied_end - 1)))

    def start_brokers(self, broker_ids: Iterable[int]) -> None:
        """Register each broker and heartbeat until it is unfenced."""
        ids = list(broker_ids)
        for broker_id in ids:
            self.register(broker_id)
        for broker_id in ids:
            self.heartbeat(broker_id)
            assert not self.image.brokers.by_id[broker_id].fenced, broker_id

    def pass_time(self, ms: int, *, alive: Iterable[int] = (), step_ms: int = 1000) -> None:
        """Let ``ms`` pass, the ``alive`` brokers heartbeating and the controller ticking."""
        alive = list(alive)
        end = self.now_ms + ms
        while self.now_ms < end:
            self.advance(min(step_ms, end - self.now_ms))
            for broker_id in alive:
                self.heartbeat(broker_id)
            self.controller.tick()
            self.advance(50)  # what the tick proposed commits

    # -- topics and partitions ----------------------------------------------------------------

    def create_topic(self, name: str, layout: Sequence[Sequence[int]],
                     configs: dict[str, str | None] | None = None) -> None:
        self.commit(self.controller.create_topics([NewTopic(
            name, assignments=list(enumerate(layout)), configs=configs or {})])[0])

    def partition(self, name: str, index: int = 0) -> PartitionImage:
        return self.image.topics_by_name[name].partitions[index]

    def alter_isr(self, name: str, index: int, isr: Sequence[int], *,
                  leader: int | None = None) -> AlterPartitionRequest:
        """The AlterPartition request (v3) the partition's leader would send for ``isr``."""
        partition = self.partition(name, index)
        sender = partition.leader if leader is None else leader
        brokers = self.image.brokers.by_id
        return AlterPartitionRequest(
            broker_id=sender, broker_epoch=brokers[sender].epoch,
            topics=[TopicData(topic_id=self.image.topics_by_name[name].topic_id, partitions=[
                PartitionData(partition_index=index, leader_epoch=partition.leader_epoch,
                              partition_epoch=partition.partition_epoch,
                              new_isr_with_epochs=[BrokerState(r, brokers[r].epoch) for r in isr])
            ])])
