"""The simulated producer: acks=all, one batch in flight per partition, retried.

Per partition it sends a batch of 1-3 fresh values (``p<index>-<n>``) to the leader it knows;
it learns leaders from any broker's image (a Metadata request to a seeded broker). It retries
the *same* batch after ``retry.backoff.ms`` on NOT_LEADER_OR_FOLLOWER and FENCED errors (after
asking for metadata again), NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
REQUEST_TIMED_OUT and a request that got no answer, until ``delivery.timeout.ms``, then gives the
batch up. Without idempotence a retried batch may be written twice: only the offsets of the
attempt that was acknowledged are reported (``Invariants.acknowledged``).

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.records import Record, encode_batch
from tests.simulation.replication.options import DELIVERY_TIMEOUT_MS, RETRY_BACKOFF_MS
from tests.simulation.replication.shell import ProduceAnswer, ProducePayload

if TYPE_CHECKING:
    from tests.simulation.replication.simulator import Simulation

CLIENT = 200
NO_LEADER = -1
_REFRESH = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


@dataclass
class PartitionProducer:
    index: int
    leader: int = NO_LEADER
    values: list[bytes] | None = None
    started_ms: int = 0
    in_flight: bool = False
    next_value: int = 0
    acked_after_heal: bool = False


class Client:
    def __init__(self, simulation: Simulation, partitions: int) -> None:
        self.sim = simulation
        self.partitions = [PartitionProducer(index) for index in range(partitions)]
        self.stopped = False  # no new batches (the end of the recovery phase)
        self.acknowledged = 0
        self.given_up = 0

    def start(self) -> None:
        for producer in self.partitions:
            self.sim.push(self.sim.now_ms + 1, self.step, producer)

    def step(self, producer: PartitionProducer) -> bool:
        sim = self.sim
        if producer.in_flight:
            return False
        if producer.values is None:
            if self.stopped:
                return False
            count = sim.workload_rng.randint(1, 3)
            producer.values = [b"p%d-%d" % (producer.index, producer.next_value + i)
                               for i in range(count)]
            producer.next_value += count
            producer.started_ms = sim.now_ms
        elif sim.now_ms - producer.started_ms > DELIVERY_TIMEOUT_MS:
            sim.note("gave-up", producer.index, producer.values)
            self.given_up += 1
            producer.values = None
            sim.push(sim.now_ms + RETRY_BACKOFF_MS, self.step, producer)
            return False
        producer.in_flight = True
        if producer.leader == NO_LEADER:
            source = sim.workload_rng.randrange(len(sim.brokers))
            sim.call(CLIENT, source, "metadata", producer.index,
                     partial(self._leader_known, producer))
            return False
        records = encode_batch([Record(offset=i, timestamp=sim.clock.milliseconds(), key=None,
                                       value=value) for i, value in enumerate(producer.values)])
        sim.call(CLIENT, producer.leader, "produce", ProducePayload(producer.index, records),
                 partial(self._answered, producer, producer.values))
        return False

    def _leader_known(self, producer: PartitionProducer, leader: int | None) -> None:
        producer.in_flight = False
        producer.leader = NO_LEADER if leader is None else leader
        self.sim.push(self.sim.now_ms + (0 if producer.leader >= 0 else RETRY_BACKOFF_MS),
                      self.step, producer)

    def _answered(self, producer: PartitionProducer, values: list[bytes],
                  answer: ProduceAnswer | None) -> None:
        sim = self.sim
        producer.in_flight = False
        code = ErrorCode.REQUEST_TIMED_OUT if answer is None else answer.error_code
        if answer is None or code in _REFRESH:
            producer.leader = NO_LEADER
        if code == ErrorCode.NONE and answer is not None:
            sim.note("acked", producer.index, f"offset {answer.first_offset}", values)
            sim.invariants.acknowledged(producer.index, answer.first_offset, values)
            self.acknowledged += len(values)
            producer.values = None
            producer.acked_after_heal = producer.acked_after_heal or sim.healed_at_ms is not None
            sim.push(sim.now_ms + sim.workload_rng.randint(0, 20), self.step, producer)
            return
        sim.push(sim.now_ms + RETRY_BACKOFF_MS, self.step, producer)

    def answer_metadata(self, image: Any, index: int) -> int:
        """A broker's answer to Metadata: the leader of partition ``index`` in its image."""
        topic = image.topics_by_name.get("t")
        partition = None if topic is None else topic.partitions.get(index)
        return NO_LEADER if partition is None else partition.leader
