"""Disk faults (issue 13, case G8): one bit flipped, or a file cut short, in a stopped node's
log directory.

What can be hit (``KINDS``; a node's ``log.dirs`` directory, Kafka's layout):

``segment``            a closed ``<base>.log`` of a topic partition (every one but the newest:
                       the active segment is the power-loss fault's business)
``index``              any ``.index`` (offset index) of a topic partition
``timeindex``          any ``.timeindex``
``txnindex``           any ``.txnindex``
``leader-epoch-checkpoint``, ``partition.metadata``   per partition directory
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``                      at the log directory's root
``metadata-log``       any ``.log`` of ``__cluster_metadata-0`` (the Raft log: always recovered
                       at open, so its active segment counts too)
``metadata-snapshot``  a KRaft snapshot (``<end offset>-<epoch>.checkpoint``) of
                       ``__cluster_metadata-0``; not in ``DEFAULT_KINDS`` (its damage is only
                       reported, see the report of the disk-faults brief)

Damage: ``flip`` XORs one random bit of one random byte; ``truncate`` cuts the file to a random
length in ``[0, size)``. Both are applied while the node is down (``corrupt`` never checks:
the caller kills the node first, ``kill -9``, so the restart is unclean and Samsa's start-up
verification runs; see ``samsa.log.verify.on.startup``).

What the broker must do with it (checked by ``tests/faults/test_disk.py``): recover each log
to a valid prefix of what it held or report the file and offset, refetch the rest from the
leader, and never serve a corrupt batch.

``run_corruptions(cluster, n, seed)`` is the entry point for the fault campaign: per round one
node is killed, ``n`` damages are spread over its files, and it is restarted.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "DEFAULT_KINDS",
    "KINDS",
    "Corruption",
    "candidates",
    "corrupt",
    "corrupt_node",
    "run_corruptions",
]

METADATA_DIRECTORY = "__cluster_metadata-0"
ROOT_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
)
PARTITION_FILES = ("leader-epoch-checkpoint", "partition.metadata")
SUFFIX_KINDS = {".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex"}
KINDS = frozenset({
    "segment", "index", "timeindex", "txnindex", *PARTITION_FILES, *ROOT_CHECKPOINTS,
    "metadata-log", "metadata-snapshot",
})
DEFAULT_KINDS = KINDS - {"metadata-snapshot"}
DAMAGES = ("flip", "truncate")


@dataclass(frozen=True, slots=True)
class Corruption:
    """What ``corrupt`` did: ``offset`` is the byte flipped, or the new length of a cut file;
    ``old_byte`` the byte that was there (-1 when a cut file was empty at that point)."""

    path: str
    kind: str
    damage: str  # "flip" or "truncate"
    offset: int
    old_byte: int
    bit: int = -1  # the bit flipped (0 = least significant); -1 for a truncation
    old_size: int = 0

    def as_event(self) -> dict[str, Any]:
        """The fields of a history ``fault`` event (``tests.faults.history``)."""
        return {"name": "disk", **asdict(self)}


def candidates(data_dir: Path, kinds: Collection[str] = DEFAULT_KINDS) -> list[tuple[str, Path]]:
    """Every non-empty file of ``data_dir`` a damage of one of ``kinds`` may hit, sorted (so a
    seed picks the same file on every run)."""
    unknown = set(kinds) - KINDS
    if unknown:
        raise ValueError(f"unknown corruption kinds {sorted(unknown)}; known: {sorted(KINDS)}")
    found = [(kind, path) for kind, path in _classified(data_dir) if kind in kinds]
    return sorted((kind, path) for kind, path in found if path.stat().st_size > 0)


def _classified(data_dir: Path) -> Iterator[tuple[str, Path]]:
    for name in ROOT_CHECKPOINTS:
        if (data_dir / name).is_file():
            yield name, data_dir / name
    for directory in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if directory.name == METADATA_DIRECTORY:
            yield from _metadata_files(directory)
        elif _is_partition_directory(directory.name):
            yield from _partition_files(directory)


def _is_partition_directory(name: str) -> bool:
    topic, _, partition = name.rpartition("-")
    return bool(topic) and partition.isdigit()


def _partition_files(directory: Path) -> Iterator[tuple[str, Path]]:
    logs = sorted(directory.glob("*.log"))
    for path in logs[:-1]:  # the newest segment is the active one
        yield "segment", path
    for suffix, kind in SUFFIX_KINDS.items():
        for path in sorted(directory.glob(f"*{suffix}")):
            yield kind, path
    for name in PARTITION_FILES:
        if (directory / name).is_file():
            yield name, directory / name


def _metadata_files(directory: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(directory.glob("*.log")):
        yield "metadata-log", path
    for path in sorted(directory.glob("*.checkpoint")):
        yield "metadata-snapshot", path


def corrupt(
    data_dir: Path,
    rng: random.Random,
    kinds: Collection[str] = DEFAULT_KINDS,
    damages: Collection[str] = DAMAGES,
) -> Corruption | None:
    """Damage one file of ``data_dir`` (see the module docstring); None when no file of
    ``kinds`` exists. The node must be down."""
    files = candidates(data_dir, kinds)
    if not files:
        return None
    kind, path = rng.choice(files)
    damage = rng.choice(sorted(damages))
    if damage == "flip":
        return flip_bit(path, kind, rng)
    if damage == "truncate":
        return truncate(path, kind, rng)
    raise ValueError(f"unknown damage {damage!r}; known: {DAMAGES}")


def flip_bit(path: Path, kind: str, rng: random.Random) -> Corruption:
    size = path.stat().st_size
    offset, bit = rng.randrange(size), rng.randrange(8)
    with open(path, "r+b") as handle:
        old = os.pread(handle.fileno(), 1, offset)[0]
        os.pwrite(handle.fileno(), bytes([old ^ (1 << bit)]), offset)
    return Corruption(str(path), kind, "flip", offset, old, bit, size)


def truncate(path: Path, kind: str, rng: random.Random) -> Corruption:
    size = path.stat().st_size
    length = rng.randrange(size)
    with open(path, "r+b") as handle:
        old = os.pread(handle.fileno(), 1, length)[0]
        handle.truncate(length)
    return Corruption(str(path), kind, "truncate", length, old, -1, size)


def corrupt_node(
    data_dir: Path,
    rng: random.Random,
    count: int,
    kinds: Collection[str] = DEFAULT_KINDS,
    damages: Collection[str] = DAMAGES,
) -> list[Corruption]:
    """``count`` damages (fewer if the files run out) in one stopped node's ``data_dir``: the
    function the G8 campaign calls per node. A file may be hit more than once."""
    done = []
    for _ in range(count):
        corruption = corrupt(data_dir, rng, kinds, damages)
        if corruption is None:
            break
        done.append(corruption)
    return done


class _Node(Protocol):
    @property
    def log_dir(self) -> Path: ...


class Cluster(Protocol):
    """What ``run_corruptions`` needs of a cluster (``tests.integration.cluster_nodes``'s
    ``ClusterNodes`` has it): its nodes by id, ``kill`` (-9) and ``start`` one."""

    @property
    def nodes(self) -> Mapping[int, _Node]: ...

    def kill(self, node_id: int) -> None: ...

    def start(self, node_id: int) -> object: ...


def run_corruptions(
    cluster: Cluster,
    n: int,
    seed: int,
    *,
    per_round: int = 3,
    kinds: Collection[str] = DEFAULT_KINDS,
    after_round: Callable[[int, list[Corruption]], None] | None = None,
) -> list[tuple[int, list[Corruption]]]:
    """G8: ``n`` damages in rounds of ``per_round``: each round kills one random node
    (``kill -9``: the restart is unclean, so the start-up verification runs), damages its
    files, and starts it again. ``after_round(node_id, corruptions)`` runs after each restart:
    the campaign waits there for the node to be back in the ISR and caught up (damaging a
    second replica before the first has healed is a majority fault, not G8's) and logs the
    ``fault`` event (``Corruption.as_event``). Returns ``(node_id, corruptions)`` per round."""
    rng = random.Random(seed)
    rounds = []
    remaining = n
    while remaining > 0:
        node_id = rng.choice(sorted(cluster.nodes))
        cluster.kill(node_id)
        damage = corrupt_node(cluster.nodes[node_id].log_dir, rng, min(per_round, remaining),
                              kinds)
        cluster.start(node_id)
        rounds.append((node_id, damage))
        if after_round is not None:
            after_round(node_id, damage)
        remaining -= max(1, len(damage))
    return rounds
