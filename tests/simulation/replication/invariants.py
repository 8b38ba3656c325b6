"""The invariants of the replication data plane, checked after every event.

1. **AcknowledgedRecordsKept**: no acks=all record is acknowledged and then lost or changed.
   Each acknowledged (offset, value) must match the batch the committed ledger (3) holds there;
   every leader of a new epoch, when it takes over, must hold every acknowledged record at its
   offset; at the end (after healing) the leader holds them all below its high watermark.
2. **MonotonicHighWatermark**: a replica's high watermark never moves back within a leader
   epoch (per process incarnation; a follower from its first answer of the epoch on, since its
   first answer may lower what it carried over from the previous epoch, as Kafka's follower
   takes the new leader's high watermark as it is).
3. **ConsistentCommittedData**: replicas agree below the high watermark. Every batch below a
   replica's high watermark goes into one ledger per partition (base offset -> bytes) as first
   seen; every other replica's batch there, at any later time, must be byte-equal (and no
   batches may overlap). Checked incrementally as each high watermark advances.
4. **SingleLeaderPerEpoch**: at most one broker leads a partition in a given leader epoch.

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.records import decode_batch, read_batch_header
from storage.log import Log
from tests.simulation.cluster import InvariantViolation

if TYPE_CHECKING:
    from replication.partition import Partition
    from tests.simulation.replication.broker import Incarnation, SimBroker

ReplicaKey = tuple[int, int, int]  # broker id, incarnation, partition index


def read_batches(log: Log, start: int, end: int) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of every batch holding offsets in [start, end)."""
    batches: list[tuple[int, int, bytes]] = []
    offset = max(start, log.log_start_offset)
    end = min(end, log.log_end_offset)
    while offset < end:
        piece = log.read(offset, 1 << 30, max_offset=end)
        if piece is None:
            break
        data = piece.read()
        position, moved = 0, False
        while position + 61 <= len(data):
            header = read_batch_header(data, position)
            size = header.size_in_bytes
            batches.append((header.base_offset, header.last_offset, data[position:position + size]))
            position += size
            offset, moved = header.next_offset, True
        if not moved:
            break
    return batches


def record_values(batches: Iterable[tuple[int, int, bytes]]) -> dict[int, bytes | None]:
    return {record.offset: record.value for _, _, data in batches
            for record in decode_batch(data).records}


class Invariants:
    def __init__(self, partitions: int) -> None:
        self.ledger: list[dict[int, tuple[int, bytes]]] = [{} for _ in range(partitions)]
        self.ledger_bases: list[list[int]] = [[] for _ in range(partitions)]
        self.acked: list[dict[int, bytes]] = [{} for _ in range(partitions)]
        self.unchecked_acks: list[tuple[int, int, bytes]] = []
        self.covered: dict[ReplicaKey, int] = {}
        self.high_watermarks: dict[ReplicaKey, tuple[int, bool, int]] = {}
        self.leaders: dict[tuple[int, int], int] = {}
        self.leaders_checked: set[tuple[int, int, int, int]] = set()

    # -- events from the simulator --------------------------------------------------------------

    def acknowledged(self, index: int, first_offset: int, values: list[bytes]) -> None:
        for delta, value in enumerate(values):
            self.acked[index][first_offset + delta] = value
            self.unchecked_acks.append((index, first_offset + delta, value))

    def after_event(self, brokers: Iterable[SimBroker]) -> None:
        for broker in brokers:
            process = broker.process
            if process is None:
                continue
            for index, partition in process.partitions.items():
                key = (broker.broker_id, process.number, index)
                synced = process_synced(process, index, partition.leader_epoch)
                self._single_leader(key, partition)
                self._monotonic(key, partition, synced)
                self._cover(key, partition)
        if self.unchecked_acks:
            self._check_acks()

    # -- 4 ----------------------------------------------------------------------------------------

    def _single_leader(self, key: ReplicaKey, partition: Partition) -> None:
        if not partition.is_leader:
            return
        broker_id, number, index = key
        epoch = partition.leader_epoch
        holder = self.leaders.setdefault((index, epoch), broker_id)
        if holder != broker_id:
            raise InvariantViolation(
                "SingleLeaderPerEpoch",
                f"partition {index}: brokers {holder} and {broker_id} both lead epoch {epoch}")
        if (index, epoch, broker_id, number) not in self.leaders_checked:
            self.leaders_checked.add((index, epoch, broker_id, number))
            self.leader_holds_acks(index, partition, f"new leader {broker_id} of epoch {epoch}")

    # -- 2 ----------------------------------------------------------------------------------------

    def _monotonic(self, key: ReplicaKey, partition: Partition, synced: bool) -> None:
        epoch = partition.leader_epoch
        leader = partition.is_leader
        hw = partition.high_watermark
        seen = self.high_watermarks.get(key)
        if not leader and not synced:
            self.high_watermarks.pop(key, None)
            return
        if seen is not None and seen[:2] == (epoch, leader) and hw < seen[2]:
            raise InvariantViolation(
                "MonotonicHighWatermark",
                f"broker {key[0]} partition {key[2]} ({'leader' if leader else 'follower'}, "
                f"epoch {epoch}): high watermark moved back from {seen[2]} to {hw}")
        self.high_watermarks[key] = (epoch, leader, hw)

    # -- 3 ----------------------------------------------------------------------------------------

    def _cover(self, key: ReplicaKey, partition: Partition) -> None:
        log: Log = partition.log
        hw = partition.high_watermark
        start = self.covered.get(key, log.log_start_offset)
        if hw <= start:
            self.covered[key] = hw
            return
        for base, last, data in read_batches(log, start, hw):
            self._into_ledger(key, base, last, data)
        self.covered[key] = hw

    def _into_ledger(self, key: ReplicaKey, base: int, last: int, data: bytes) -> None:
        broker_id, _, index = key
        ledger, bases = self.ledger[index], self.ledger_bases[index]
        seen = ledger.get(base)
        if seen is not None:
            if seen != (last, data):
                raise InvariantViolation(
                    "ConsistentCommittedData",
                    f"partition {index}: broker {broker_id} holds another batch at offset {base} "
                    f"(offsets {base}-{last}, {len(data)} bytes) than the one committed "
                    f"before (offsets {base}-{seen[0]}, {len(seen[1])} bytes)")
            return
        position = bisect.bisect_left(bases, base)
        before = bases[position - 1] if position else None
        after = bases[position] if position < len(bases) else None
        if (before is not None and ledger[before][0] >= base) or (after is not None and after <= last):
            raise InvariantViolation(
                "ConsistentCommittedData",
                f"partition {index}: broker {broker_id}'s batch {base}-{last} below its high "
                f"watermark overlaps a committed batch of another shape")
        bases.insert(position, base)
        ledger[base] = (last, data)

    # -- 1 ----------------------------------------------------------------------------------------

    def _check_acks(self) -> None:
        waiting = []
        for index, offset, value in self.unchecked_acks:
            bases = self.ledger_bases[index]
            position = bisect.bisect_right(bases, offset) - 1
            if position < 0 or self.ledger[index][bases[position]][0] < offset:
                waiting.append((index, offset, value))  # not below any high watermark seen yet
                continue
            data = self.ledger[index][bases[position]][1]
            found = record_values([(0, 0, data)]).get(offset)
            if found != value:
                raise InvariantViolation(
                    "AcknowledgedRecordsKept",
                    f"partition {index}: offset {offset} was acknowledged as {value!r}, the "
                    f"committed batch there holds {found!r}")
        self.unchecked_acks = waiting

    def leader_holds_acks(self, index: int, partition: Partition, who: str, *,
                          below_high_watermark: bool = False) -> None:
        acked = self.acked[index]
        if not acked:
            return
        log: Log = partition.log
        limit = partition.high_watermark if below_high_watermark else log.log_end_offset
        last = max(acked)
        if limit <= last:
            missing = sorted(o for o in acked if o >= limit)
            raise InvariantViolation(
                "AcknowledgedRecordsKept",
                f"partition {index}: {who} has {'high watermark' if below_high_watermark else 'log end'} "
                f"{limit}, but offsets {missing[:5]}{'...' if len(missing) > 5 else ''} "
                f"({len(missing)}) were acknowledged")
        values = record_values(read_batches(log, min(acked), limit))
        for offset, value in sorted(acked.items()):
            if values.get(offset) != value:
                raise InvariantViolation(
                    "AcknowledgedRecordsKept",
                    f"partition {index}: {who} holds {values.get(offset)!r} at offset {offset}, "
                    f"acknowledged as {value!r}")


def process_synced(process: Incarnation, index: int, epoch: int) -> bool:
    """The follower applied an answer of its leader in ``epoch`` (set by the fetch loop)."""
    return process.synced_epochs.get(index) == epoch
