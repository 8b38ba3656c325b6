"""A duplicated value is the broker's failure within one producer epoch, the client's epoch bump
across two (tests/faults/duplicates.py)."""

from __future__ import annotations

import struct

from tests.faults.checker_replicas import ReplicaLog
from tests.faults.duplicates import split_duplicates


def header(base: int, records: int, producer_id: int, epoch: int) -> bytes:
    """A RecordBatch v2 header with the fields the split reads (the rest zero)."""
    data = bytearray(61)
    struct.pack_into(">q", data, 0, base)
    struct.pack_into(">i", data, 23, records - 1)
    struct.pack_into(">qh", data, 43, producer_id, epoch)
    return bytes(data)


def replicas(*batches: tuple[int, int, int, int]) -> dict:
    log = ReplicaLog(0, 100, [(base, header(base, n, pid, epoch)) for base, n, pid, epoch in batches])
    return {1: {("t", 0): log}}


def test_copies_in_two_epochs_of_one_producer_are_the_clients_epoch_bump() -> None:
    found = [{"value": "p-0-7", "found": [["t", 0, 3], ["t", 0, 12]]}]
    broker, client = split_duplicates(found, replicas((0, 10, 2000, 0), (10, 5, 2000, 1)))
    assert broker == [] and [d["writers"] for d in client] == [[(2000, 0), (2000, 1)]]


def test_copies_in_one_epoch_are_the_brokers() -> None:
    found = [{"value": "p-0-7", "found": [["t", 0, 3], ["t", 0, 12]]}]
    broker, client = split_duplicates(found, replicas((0, 10, 2000, 0), (10, 5, 2000, 0)))
    assert client == [] and len(broker) == 1


def test_copies_from_two_producers_or_unheld_offsets_are_the_brokers() -> None:
    two = [{"value": "v", "found": [["t", 0, 3], ["t", 0, 12]]}]
    assert len(split_duplicates(two, replicas((0, 10, 2000, 0), (10, 5, 3000, 1)))[0]) == 1
    beyond = [{"value": "v", "found": [["t", 0, 3], ["t", 0, 40]]}]
    assert len(split_duplicates(beyond, replicas((0, 10, 2000, 0), (10, 5, 2000, 1)))[0]) == 1
