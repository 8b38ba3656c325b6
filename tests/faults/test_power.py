"""The power-loss cutter on plain files (a property test), and on a real node with the fsync
ledger (integration: acknowledged records with flush.messages=1 survive; the default mode
recovers a valid prefix)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.records import iter_batches
from storage.fsync import LEDGER_ENVIRONMENT_VARIABLE, fsync, fsync_directory, open_ledger
from tests.faults.power import REVERT_RENAME, TRUNCATE, VANISH, power_loss, read_ledger
from tests.integration.cluster_nodes import (  # noqa: F401 - the cluster_nodes fixture
    ClusterNodes,
    cluster_nodes,
    wait_until,
)
from tests.integration.conftest import BrokerProcess
from tests.integration.test_bad_input import Client, batch, create, produce
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_replication import partition_state


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger"
    open_ledger(path)
    yield path
    open_ledger(None)


# One file's life: chunks written, each followed (or not) by an fsync.
file_lives = st.lists(
    st.tuples(st.binary(min_size=1, max_size=64), st.booleans()), min_size=0, max_size=6)


def live(path: Path, life: list[tuple[bytes, bool]]) -> tuple[bytes, int]:
    """Write the chunks, syncing where asked: the file's bytes and its durable length."""
    durable = 0
    data = b""
    with open(path, "wb") as file:
        for chunk, synced in life:
            file.write(chunk)
            data += chunk
            file.flush()
            if synced:
                fsync(file.fileno(), path)
                durable = len(data)
    return data, durable


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lives=st.lists(file_lives, min_size=1, max_size=5),
       synced_before=st.lists(st.booleans(), min_size=5, max_size=5),
       seed=st.integers(0, 2**32 - 1))
def test_each_file_ends_between_its_durable_length_and_its_length(
    tmp_path_factory: pytest.TempPathFactory, lives: list[list[tuple[bytes, bool]]],
    synced_before: list[bool], seed: int,
) -> None:
    root = tmp_path_factory.mktemp("data")
    ledger = root.parent / f"{root.name}.ledger"
    open_ledger(ledger)
    try:
        expected = {}
        for index, life in enumerate(lives):
            expected[f"f{index}"] = live(root / f"f{index}", life)
            if synced_before[index]:
                fsync_directory(root)  # f0..f<index> have durable entries from here on
    finally:
        open_ledger(None)
    listed = read_ledger([ledger]).directories.get(str(root), {})
    cuts = power_loss([root], [ledger], random.Random(seed))
    for name, (data, durable) in expected.items():
        path = root / name
        if not path.exists():
            assert name not in listed, "a file whose directory entry was synced vanished"
            assert any(cut.action == VANISH and cut.path == str(path) for cut in cuts)
            continue
        content = path.read_bytes()
        assert durable <= len(content) <= len(data)
        assert data.startswith(content)
    for cut in cuts:
        if cut.action == TRUNCATE:
            assert cut.to_length < cut.from_length


def test_a_cut_is_recorded_durable_so_a_second_power_loss_cuts_nothing(
    tmp_path: Path, ledger: Path
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    live(root / "a", [(b"x" * 100, True), (b"y" * 100, False)])
    (root / "sub").mkdir()
    (root / "sub" / "b").write_bytes(b"z" * 50)
    open_ledger(None)
    for seed in range(20):  # some seed cuts something
        if power_loss([root], [ledger], random.Random(seed)):
            break
    else:
        pytest.fail("no seed cut anything")
    before = {p: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    assert power_loss([root], [ledger], random.Random(1)) == []
    assert {p: p.stat().st_size for p in root.rglob("*") if p.is_file()} == before


def test_a_rename_never_made_durable_reverts_to_its_synced_name(tmp_path: Path) -> None:
    outcomes = set()
    for seed in range(16):
        root = tmp_path / f"data{seed}"
        root.mkdir()
        ledger = tmp_path / f"ledger{seed}"
        open_ledger(ledger)
        try:
            live(root / "checkpoint.tmp", [(b"new", True)])
            fsync_directory(root)  # checkpoint.tmp's entry is durable
            os.replace(root / "checkpoint.tmp", root / "checkpoint")  # the rename is not
        finally:
            open_ledger(None)
        cuts = power_loss([root], [ledger], random.Random(seed))
        outcomes.add(tuple(cut.action for cut in cuts))
        if cuts:
            assert [cut.action for cut in cuts] == [REVERT_RENAME]
            assert (root / "checkpoint.tmp").read_bytes() == b"new"
            assert not (root / "checkpoint").exists()
        else:
            assert (root / "checkpoint").read_bytes() == b"new"
    assert outcomes == {(), (REVERT_RENAME,)}


# -- a real node: SIGKILL, power loss, restart ----------------------------------------------------

SEGMENT_BYTES = "2048"  # small segments: rolls and new segment files under the fault
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.fixture
def node_with_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BrokerProcess, Path]]:
    """A single node started with the fsync ledger on (killed, or stopped, at the end)."""
    ledger = tmp_path / "ledger"
    monkeypatch.setenv(LEDGER_ENVIRONMENT_VARIABLE, str(ledger))
    node = BrokerProcess(log_dir=tmp_path / "data", overrides={},
                         stderr_path=tmp_path / "broker.log")
    nodes = [node.start()]
    yield node, ledger
    for started in nodes:
        if started.alive():
            sigkill(started)


def sigkill(node: BrokerProcess) -> None:
    """Kill -9: the page cache keeps what the process wrote; nothing is flushed or trimmed."""
    assert node.process is not None
    node.process.kill()
    node.process.wait()
    if node.process.stdout is not None:
        node.process.stdout.close()
    node._stderr.close()  # type: ignore[attr-defined]


def batch_ends(partition_dir: Path) -> dict[int, tuple[Path, int]]:
    """Each batch's base offset → (segment file, the byte just past the batch), read from the
    files as the page cache has them."""
    ends: dict[int, tuple[Path, int]] = {}
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 12 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            if length <= 0:
                break
            position += 12 + length
            ends[base_offset] = (segment, position)
    return ends


def synced(ledger: Path, path: Path) -> int:
    """The durable length the ledger records for ``path`` (its current inode); 0 if none."""
    return read_ledger([ledger]).durable_length(str(path), path.stat().st_ino)


def read_partition(client: Client, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """Every record from offset 0 to the high watermark, CRCs checked: (offset, value)."""
    records: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        request = FetchRequest(max_wait_ms=0, max_bytes=1 << 24, topics=[FetchTopic(
            topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                    partition_max_bytes=1 << 24)])])
        answer = client.call(1, 11, request, FetchResponse, flexible=False)
        data = answer.responses[0].partitions[0]
        assert data.error_code == 0, data.error_code
        batches = list(iter_batches(data.records or b"", verify_crc=True))
        for one in batches:
            records.extend((record.offset, record.value or b"") for record in one.records)
        if not batches or batches[-1].next_offset >= data.high_watermark:
            return records
        offset = batches[-1].next_offset


def produce_values(
    client: Client, topic: str, count: int, *, check: Callable[[int, int], None] | None = None,
) -> dict[int, list[tuple[int, bytes]]]:
    """``count`` one-record batches over partitions 0 and 1, acks alternating 1 and -1:
    each partition's acknowledged (offset, value) in order."""
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for index in range(count):
        partition, value = index % 2, b"value-%05d" % index
        response = produce(client, topic, {partition: batch(value)}, acks=(1, -1)[index // 2 % 2])
        answer = response.responses[0].partition_responses[0]
        assert answer.error_code == 0, answer.error_code
        if check is not None:
            check(partition, answer.base_offset)
        acked[partition].append((answer.base_offset, value))
    return acked


def restart_after_power_loss(
    node: BrokerProcess, ledger: Path, seed: int
) -> tuple[BrokerProcess, list[Any]]:
    sigkill(node)
    cuts = power_loss([node.log_dir], [ledger], random.Random(seed))
    again = BrokerProcess(log_dir=node.log_dir, overrides={},
                          stderr_path=node.stderr_path.with_name("broker-again.log"))
    return again.start(), cuts


@pytest.mark.integration
@pytest.mark.parametrize("seed", [1, 2])
def test_flush_messages_one_answers_after_the_sync_and_loses_nothing_acknowledged(
    node_with_ledger: tuple[BrokerProcess, Path], seed: int,
) -> None:
    node, ledger = node_with_ledger
    client = Client(node)
    create(client, "durable", partitions=2, **{"flush.messages": "1",
                                               "segment.bytes": SEGMENT_BYTES})

    def check(partition: int, base_offset: int) -> None:
        segment, end = batch_ends(node.log_dir / f"durable-{partition}")[base_offset]
        assert synced(ledger, segment) >= end, "answered before the batch was fsynced"

    acked = produce_values(client, "durable", 120, check=check)
    client.close()
    again, cuts = restart_after_power_loss(node, ledger, seed)
    try:
        assert any(cut.action == TRUNCATE for cut in cuts)  # the fault did cut something
        client = Client(again)
        for partition in (0, 1):
            assert read_partition(client, "durable", partition) == acked[partition]
        client.close()
    finally:
        assert again.stop() == 0, again.log()


@pytest.mark.integration
@pytest.mark.parametrize("seed", [3, 4])
def test_default_flush_settings_recover_a_consistent_prefix(
    node_with_ledger: tuple[BrokerProcess, Path], seed: int,
) -> None:
    node, ledger = node_with_ledger
    client = Client(node)
    create(client, "lazy", partitions=2, **{"segment.bytes": SEGMENT_BYTES})
    acked = produce_values(client, "lazy", 120)
    client.close()
    again, cuts = restart_after_power_loss(node, ledger, seed)
    try:
        assert any(cut.path.endswith(".log") for cut in cuts)  # unsynced data was cut
        client = Client(again)
        for partition in (0, 1):
            read = read_partition(client, "lazy", partition)
            assert read == acked[partition][: len(read)]  # a prefix: contiguous, in order
        assert produce(client, "lazy", {0: batch(b"after")}).responses[0] \
            .partition_responses[0].error_code == 0
        client.close()
    finally:
        assert again.stop() == 0, again.log()


@pytest.mark.integration
def test_the_default_flush_settings_do_not_sync_on_produce(
    node_with_ledger: tuple[BrokerProcess, Path],
) -> None:
    node, ledger = node_with_ledger
    client = Client(node)
    create(client, "lazy", partitions=2)
    produce_values(client, "lazy", 20)
    client.close()
    synced_segments = [path for path in read_ledger([ledger]).synced_paths
                       if "/lazy-" in path and path.endswith(".log")]
    assert synced_segments == []


@pytest.mark.integration
def test_concurrent_producers_on_many_partitions_share_syncs(
    node_with_ledger: tuple[BrokerProcess, Path],
) -> None:
    node, ledger = node_with_ledger
    client = Client(node)
    create(client, "shared", partitions=8, **{"flush.messages": "1"})
    client.close()
    answered = asyncio.run(produce_concurrently(node.port, "shared", connections=8, in_flight=4,
                                                requests_each=10))
    syncs = sum(1 for line in ledger.read_text().splitlines()
                if "/shared-" in line and '.log"' in line)
    assert answered == 8 * 4 * 10
    assert 8 <= syncs < answered  # group commit: fewer syncs than appends


async def produce_concurrently(port: int, topic: str, *, connections: int, in_flight: int,
                               requests_each: int) -> int:
    """Pipelined one-record produces (acks=1) over 8 partitions: how many were answered NONE."""
    clients = [NodeClient("127.0.0.1", port, client_id="test", request_timeout_ms=30_000)
               for _ in range(connections)]
    answered = 0

    async def sender(client: NodeClient, number: int) -> None:
        nonlocal answered
        for sent in range(requests_each):
            request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(
                    index=(number + sent) % 8, records=batch(b"v%d-%d" % (number, sent)))])])
            response = await client.send(request)
            assert isinstance(response, ProduceResponse)
            answered += response.responses[0].partition_responses[0].error_code == 0

    try:
        await asyncio.gather(*(sender(client, index * in_flight + slot)
                               for index, client in enumerate(clients)
                               for slot in range(in_flight)))
    finally:
        for client in clients:
            await client.close()
    return answered


@pytest.mark.integration
@pytest.mark.cluster
def test_acks_all_is_answered_once_every_isr_member_synced(
    cluster_nodes: Callable[..., ClusterNodes],  # noqa: F811 - the imported fixture
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = tmp_path / "cluster-ledger"  # the three nodes append to one ledger
    monkeypatch.setenv(LEDGER_ENVIRONMENT_VARIABLE, str(ledger))
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    config = {"flush.messages": "1", "min.insync.replicas": "3"}
    admin.create_topics([NewTopic("durable", 1, 3, config=config)])["durable"].result(30)

    def full_isr() -> int | None:
        leader, isr = partition_state(admin, "durable")
        return leader if isr == [1, 2, 3] else None

    for index in range(15):
        # A loaded machine can move the leader or shrink the ISR meanwhile (a missed heartbeat):
        # such a refusal is retried once the ISR is full again; only answered records are judged.
        def answered(value: bytes = b"value-%d" % index) -> tuple[int] | None:
            leader = wait_until(full_isr, what="the full ISR")
            offset = asyncio.run(produce_one(cluster.client_ports, leader, "durable", value))
            return None if offset is None else (offset,)  # offset 0 is an answer too

        (base_offset,) = wait_until(answered, timeout_s=60,
                                    what="an acknowledged acks=all produce")
        for node_id in (1, 2, 3):  # the ISR: min.insync.replicas=3 made all three needed
            segment, end = batch_ends(cluster.root / f"node-{node_id}" / "durable-0")[base_offset]
            assert synced(ledger, segment) >= end, f"node {node_id} had not synced {base_offset}"


async def produce_one(ports: dict[int, int], leader: int, topic: str,
                      value: bytes) -> int | None:
    """acks=-1 to ``leader``, following NOT_LEADER_OR_FOLLOWER's hint (KIP-951) once if the
    client's metadata was behind: the base offset, or None when the leader moved again or the
    ISR was too small (min.insync.replicas) to take it."""
    for _ in range(2):
        client = NodeClient("127.0.0.1", ports[leader], client_id="test",
                            request_timeout_ms=30_000)
        try:
            request = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0,
                                                                 records=batch(value))])])
            response = await client.send(request)
        finally:
            await client.close()
        assert isinstance(response, ProduceResponse)
        answer = response.responses[0].partition_responses[0]
        if answer.error_code == NOT_LEADER_OR_FOLLOWER and answer.current_leader.leader_id > 0:
            leader = answer.current_leader.leader_id
            continue
        if answer.error_code in RETRIABLE_PRODUCE_ERRORS:
            return None
        assert answer.error_code == 0, answer.error_code
        return answer.base_offset
    return None


# the leader moved; fewer in-sync replicas than min.insync.replicas (before or after the append)
RETRIABLE_PRODUCE_ERRORS = (NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
                            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_an_inode_number_reused_in_another_directory_lends_no_durable_length(tmp_path: Path) -> None:
    """Found by G4: node 2's ledger synced inode N as an 8-byte checkpoint after node 1 had
    synced inode N (freed and reused by the file system) as a 174-byte quorum-state; read in
    node order, the 8 bytes won and node 1's quorum-state was cut to 16."""
    from tests.faults.power import read_ledger

    one, two = tmp_path / "node-1" / "meta", tmp_path / "node-2" / "meta"
    first, second = tmp_path / "fsync-1.ledger", tmp_path / "fsync-2.ledger"
    first.write_text(json.dumps(["f", str(one / "quorum-state.tmp"), 77, 174]) + "\n")
    second.write_text(json.dumps(["f", str(two / "leader-epoch-checkpoint.tmp"), 77, 8]) + "\n")
    ledger = read_ledger([first, second])
    assert ledger.durable_length(str(one / "quorum-state"), 77) == 174
    assert ledger.durable_length(str(two / "leader-epoch-checkpoint"), 77) == 8
    assert ledger.durable_length(str(tmp_path / "elsewhere" / "x"), 77) == 0


def test_a_file_synced_again_under_its_temporary_name_keeps_the_newer_length(tmp_path: Path) -> None:
    """Found by G4: quorum-state (inode N) recorded at 174 bytes, then rewritten as
    quorum-state.tmp reusing inode N, synced at 175 and renamed: 175 is durable, not 174."""
    from tests.faults.power import read_ledger

    directory = tmp_path / "meta"
    ledger_path = tmp_path / "fsync.ledger"
    ledger_path.write_text(json.dumps(["f", str(directory / "quorum-state"), 77, 174]) + "\n"
                           + json.dumps(["f", str(directory / "quorum-state.tmp"), 77, 175]) + "\n")
    assert read_ledger([ledger_path]).durable_length(str(directory / "quorum-state"), 77) == 175
