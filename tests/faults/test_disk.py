"""Disk faults (issue 13, G8): the damage tool itself (no broker), then a 3-node cluster where
one node's files are damaged while it is down: it must come back, rejoin the ISR, hold the
leader's bytes below the high watermark and never serve a batch that fails its CRC.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.records import iter_batches
from tests.faults.disk import (
    DEFAULT_KINDS,
    KINDS,
    Corruption,
    candidates,
    corrupt,
    corrupt_node,
    run_corruptions,
)
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes, wait_until
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_replication import (
    create_topic,
    log_batches,
    partition_state,
    produce_all,
)

__all__ = ["cluster_nodes"]  # the fixture, imported for pytest

# -- the damage tool ------------------------------------------------------------------------------


def node_directory(root: Path) -> Path:
    """A node's log directory as Samsa lays it out, with recognisable contents."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "meta.properties"):
        (root / name).write_bytes(b"0\n0\n")
    for directory, bases in (("orders-0", (0, 40, 95)), ("__cluster_metadata-0", (0, 12))):
        path = root / directory
        path.mkdir()
        for base in bases:
            for suffix in (".log", ".index", ".timeindex"):
                (path / f"{base:020d}{suffix}").write_bytes(bytes(range(64)))
        (path / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0\n")
        (path / "partition.metadata").write_bytes(b"version: 0\ntopic_id: x\n")
    (root / "orders-0" / f"{40:020d}.txnindex").write_bytes(bytes(34))
    (root / "__cluster_metadata-0" / "00000000000000000012-0000000001.checkpoint").write_bytes(
        b"snapshot")
    return root


def test_candidates_are_classified_and_the_active_segment_is_left_alone(tmp_path: Path) -> None:
    found = candidates(node_directory(tmp_path), KINDS)
    by_kind: dict[str, list[str]] = {}
    for kind, path in found:
        by_kind.setdefault(kind, []).append(f"{path.parent.name}/{path.name}")
    assert by_kind["segment"] == ["orders-0/00000000000000000000.log",
                                  "orders-0/00000000000000000040.log"]
    assert by_kind["metadata-log"] == ["__cluster_metadata-0/00000000000000000000.log",
                                       "__cluster_metadata-0/00000000000000000012.log"]
    assert len(by_kind["index"]) == 3 and len(by_kind["timeindex"]) == 3
    assert by_kind["txnindex"] == ["orders-0/00000000000000000040.txnindex"]
    assert by_kind["leader-epoch-checkpoint"] == ["orders-0/leader-epoch-checkpoint"]
    assert len(by_kind["metadata-snapshot"]) == 1
    assert "meta.properties" not in str(found)
    assert all(kind in DEFAULT_KINDS for kind, _ in candidates(tmp_path))
    assert not [kind for kind, _ in candidates(tmp_path) if kind == "metadata-snapshot"]


def test_a_flip_changes_exactly_one_bit_and_says_where(tmp_path: Path) -> None:
    root = node_directory(tmp_path)
    before = {path: path.read_bytes() for _, path in candidates(root)}
    done = corrupt(root, random.Random(3), damages=["flip"])
    assert done is not None and done.damage == "flip"
    path = Path(done.path)
    after = path.read_bytes()
    differing = [i for i, (a, b) in enumerate(zip(before[path], after, strict=True)) if a != b]
    assert differing == [done.offset]
    assert before[path][done.offset] == done.old_byte
    assert after[done.offset] == done.old_byte ^ (1 << done.bit)
    assert all(p.read_bytes() == data for p, data in before.items() if p != path)


def test_a_truncation_cuts_the_file_where_it_says(tmp_path: Path) -> None:
    root = node_directory(tmp_path)
    done = corrupt(root, random.Random(5), kinds={"segment"}, damages=["truncate"])
    assert done is not None and done.kind == "segment"
    assert Path(done.path).stat().st_size == done.offset < done.old_size


def test_the_same_seed_does_the_same_damage(tmp_path: Path) -> None:
    first = corrupt_node(node_directory(tmp_path / "a"), random.Random(11), 6)
    second = corrupt_node(node_directory(tmp_path / "b"), random.Random(11), 6)
    assert [(Path(c.path).name, c.offset, c.damage, c.bit) for c in first] == [
        (Path(c.path).name, c.offset, c.damage, c.bit) for c in second]
    assert first[0].as_event()["name"] == "disk"


def test_unknown_kinds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown corruption kinds"):
        candidates(tmp_path, {"segments"})


def test_nothing_to_damage_is_none(tmp_path: Path) -> None:
    assert corrupt(tmp_path, random.Random(1)) is None
    assert corrupt_node(tmp_path, random.Random(1), 3) == []


class _Node:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir


class _Cluster:
    """Stands in for the process cluster: records kills and starts, checks the order."""

    def __init__(self, root: Path) -> None:
        self.nodes = {n: _Node(node_directory(root / f"node-{n}")) for n in (1, 2, 3)}
        self.events: list[tuple[str, int]] = []
        self.down: set[int] = set()

    def kill(self, node_id: int) -> None:
        self.events.append(("kill", node_id))
        self.down.add(node_id)

    def start(self, node_id: int) -> None:
        assert node_id in self.down, "started without being killed"
        self.events.append(("start", node_id))
        self.down.discard(node_id)


def test_run_corruptions_damages_only_stopped_nodes_round_by_round(tmp_path: Path) -> None:
    cluster = _Cluster(tmp_path)
    seen: list[tuple[int, int]] = []
    rounds = run_corruptions(cluster, 7, seed=4, per_round=3,
                             after_round=lambda node, done: seen.append((node, len(done))))
    assert [len(done) for _, done in rounds] == [3, 3, 1]
    assert seen == [(node, len(done)) for node, done in rounds]
    assert cluster.events == [e for node, _ in rounds for e in (("kill", node), ("start", node))]
    for node, done in rounds:
        assert all(Path(c.path).is_relative_to(cluster.nodes[node].log_dir) for c in done)


# -- a damaged node in a cluster ------------------------------------------------------------------

TOPIC = "damaged"
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
CLUSTER_CONFIG = {
    "replica_selector_class": SELECTOR,
    # small metadata segments, so the Raft log has closed segments to damage too
    "metadata_log_segment_min_bytes": "4096",
    "metadata_log_segment_bytes": "4096",
}


PRODUCER = {"batch.size": 4096}  # batches well below segment.bytes


def _values(start: int, count: int) -> list[bytes]:
    return [b"value-%05d-" % n + b"x" * (60 + n % 50) for n in range(start, start + count)]


def _fetch(cluster: ClusterNodes, node_id: int, offset: int) -> Any:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchTopic(
        topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                partition_max_bytes=64 * 1024)])])

    async def ask() -> Any:
        client = NodeClient("127.0.0.1", cluster.client_ports[node_id], client_id="disk-test",
                            request_timeout_ms=10000)
        try:
            return await client.send(request, version=12)
        finally:
            await client.close()

    return asyncio.run(ask()).responses[0].partitions[0]


def _high_watermark(cluster: ClusterNodes, node_id: int) -> int:
    return int(_fetch(cluster, node_id, 0).high_watermark)


def _read_everything(cluster: ClusterNodes, node_id: int, end: int) -> dict[int, bytes]:
    """Every record of the node's replica up to ``end``, each batch's CRC checked (a corrupt
    batch raises CorruptMessageError here: the test fails)."""
    records: dict[int, bytes] = {}
    offset = 0
    while offset < end:
        data = _fetch(cluster, node_id, offset)
        assert data.error_code == ErrorCode.NONE, (node_id, offset, data.error_code)
        for batch in iter_batches(bytes(data.records or b""), allow_partial_tail=True):
            for record in batch.records:
                records[record.offset] = bytes(record.value or b"")
        assert max(records, default=offset - 1) >= offset, f"no progress at {offset}"
        offset = max(records) + 1
    return records


@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.parametrize(("seed", "kinds"), [
    (8, DEFAULT_KINDS), (13, DEFAULT_KINDS), (21, frozenset({"metadata-log"})),
], ids=["any-8", "any-13", "metadata-log-21"])
def test_a_damaged_node_heals_from_the_leader_and_never_serves_corrupt_data(
    cluster_nodes: Any, seed: int, kinds: frozenset[str]
) -> None:
    cluster = cluster_nodes(3, **CLUSTER_CONFIG)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    topic_config: dict[str, Any] = {"segment.bytes": "16384", "min.insync.replicas": "2"}
    create_topic(admin, TOPIC, **topic_config)
    written = _values(0, 1200)
    produce_all(cluster.bootstrap, TOPIC, written, **PRODUCER)
    wait_until(lambda: partition_state(admin, TOPIC)[1] == [1, 2, 3], timeout_s=30,
               what="every replica in the ISR")
    for node in (1, 2, 3):
        wait_until(lambda n=node: _high_watermark(cluster, n) == len(written),  # type: ignore[misc]
                   timeout_s=30, what=f"node {node} caught up")

    def healed(victim: int, damage: list[Corruption]) -> None:
        story = "\n".join(map(str, damage))
        wait_until(lambda: partition_state(admin, TOPIC)[1] == [1, 2, 3], timeout_s=90,
                   what=f"node {victim} back in the ISR after:\n{story}")
        wait_until(lambda: _high_watermark(cluster, victim) == len(written), timeout_s=60,
                   what=f"node {victim}'s high watermark at the end after:\n{story}")

    # 8 damages on one node; another round (after the first node healed) only if a small
    # file was cut to nothing and nothing of ``kinds`` was left to damage there
    rounds = run_corruptions(cluster, 8, seed, per_round=8, kinds=kinds, after_round=healed)
    assert rounds[0][1], f"nothing of {sorted(kinds)} to damage"
    written += _values(len(written), 300)
    produce_all(cluster.bootstrap, TOPIC, written[-300:], **PRODUCER)
    for victim, damage in rounds:
        healed(victim, damage)
        _check_replica(cluster, victim, written, damage)


def _check_replica(
    cluster: ClusterNodes, victim: int, written: list[bytes], damage: list[Corruption]
) -> None:
    """What the node serves is what was written, CRCs valid; its segments hold the bytes of
    an undamaged node's below the high watermark."""
    story = "\n".join(map(str, damage))
    served = _read_everything(cluster, victim, len(written))
    start = min(served)
    assert served == {n: written[n] for n in range(start, len(written))}, story
    witness = next(node for node in (1, 2, 3) if node != victim)
    ours, theirs = log_batches(cluster, victim, TOPIC), log_batches(cluster, witness, TOPIC)
    assert ours and theirs[len(theirs) - len(ours):] == ours, story
    if start:  # only a well-formed but wrong log-start-offset-checkpoint may hide a prefix
        assert any("log-start-offset-checkpoint" in c.path for c in damage), story
