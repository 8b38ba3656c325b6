"""Node identity: Kafka's ``meta.properties`` (version 1) in every log directory.

On disk, one Java-properties file per log directory, keys sorted, no comment line::

    cluster.id=<base64 uuid>
    directory.id=<base64 uuid, KIP-858: this directory's own id>
    node.id=<int>
    version=1

Kafka's ``Uuid`` text form is URL-safe base64 of the 16 bytes without padding (22 characters).
Files are replaced by temp + fsync + rename (``meta.properties.tmp``) and the directory fsynced.

Invariants (Kafka's ``MetaPropertiesEnsemble.verify``): every file of a node names the same
``cluster.id`` and the same ``node.id``, the ``node.id`` is the configured one, and no two
directories share a ``directory.id``. A broken one stops start-up naming both files.

At start-up (``load_cluster_id``):

- Samsa's single node (no ``process.roles``): the cluster id of the files, or a new random one
  at first start, written to every directory that has no file yet (as before).
- A KRaft node (``process.roles`` set): the cluster id of the files, or ``None`` = unknown when
  no directory has a file. There is no mandatory format step: the node learns the id from the
  quorum and records it with ``write_cluster_id``. ``samsa storage format`` still works.

In both, a directory without a file gets one once the cluster id is known, and a file without a
``directory.id`` gets one (Kafka does both at start-up). Called from the start-up thread before
anything serves; nothing else writes these files.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from broker.config import parse_properties
from storage.fsync import fsync, fsync_directory

__all__ = [
    "META_PROPERTIES",
    "InconsistentClusterIdError",
    "InconsistentNodeIdError",
    "MetaProperties",
    "MetaPropertiesEnsemble",
    "MetaPropertiesError",
    "load_cluster_id",
    "parse_uuid",
    "random_directory_id",
    "random_uuid",
    "write_cluster_id",
    "write_meta_properties",
]

logger = logging.getLogger("samsa.broker.meta_properties")

META_PROPERTIES = "meta.properties"
_URL_SAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]*")
_RESERVED_DIRECTORY_IDS = 100  # Kafka's DirectoryId: Uuid(0, 0..99) are reserved


class MetaPropertiesError(Exception):
    """A ``meta.properties`` file is unreadable, malformed, or disagrees with another."""


class InconsistentClusterIdError(MetaPropertiesError):
    """Two files (or a file and the cluster id being recorded) name different clusters."""


class InconsistentNodeIdError(MetaPropertiesError):
    """Two files, or a file and ``node.id`` in the configuration, name different nodes."""


def random_uuid() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: never the reserved ids (all-zero high half
    with a low half below 100), never a string starting with '-' (it would read as an option)."""
    while True:
        raw = secrets.token_bytes(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and not _is_reserved(raw):
            return text


random_directory_id = random_uuid  # Kafka's DirectoryId.random(): the same rules


def _is_reserved(raw: bytes) -> bool:
    return raw[:8] == bytes(8) and int.from_bytes(raw[8:], "big") < _RESERVED_DIRECTORY_IDS


def parse_uuid(text: str) -> bytes:
    """The 16 bytes of a Kafka ``Uuid`` string; ValueError with Kafka's reason otherwise."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded "
                         "as a base64 UUID")
    try:
        if not _URL_SAFE_BASE64.fullmatch(text):
            raise ValueError("a character outside the URL-safe base64 alphabet")
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as error:
        raise ValueError(f"Input string `{text}` is not base64: {error}") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not "
                         "equal to the expected 16 bytes of a base64-encoded UUID")
    return raw


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The contents of one ``meta.properties`` file (version 1)."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_text(self) -> str:
        lines = {"cluster.id": self.cluster_id, "node.id": str(self.node_id),
                 "version": str(self.version)}
        if self.directory_id is not None:
            lines["directory.id"] = self.directory_id
        return "".join(f"{key}={value}\n" for key, value in sorted(lines.items()))

    def to_properties(self) -> dict[str, str]:
        return dict(parse_properties(self.to_text()))

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], path: Path) -> MetaProperties:
        """Kafka's ``MetaProperties.Builder`` rules for a version 1 file."""
        version = properties.get("version", "0").strip()
        if version != "1":
            raise MetaPropertiesError(
                f"Found unsupported version {version} in {path}: Samsa reads version 1 "
                "(KRaft) meta.properties files only")
        cluster_id = properties.get("cluster.id", "").strip()
        if not cluster_id:
            raise MetaPropertiesError(f"cluster.id was not specified in the v1 file: {path}")
        node_text = properties.get("node.id", "").strip()
        if not node_text:
            raise MetaPropertiesError(f"node.id was not specified in {path}")
        if not node_text.lstrip("-").isdigit():
            raise MetaPropertiesError(f"node.id {node_text!r} in {path} is not an integer")
        directory_id = properties.get("directory.id")
        if directory_id is not None:
            try:
                parse_uuid(directory_id.strip())
            except ValueError as error:
                raise MetaPropertiesError(f"Unable to read directory.id as a Uuid in {path}: "
                                          f"{error}") from None
        return cls(cluster_id, int(node_text), directory_id and directory_id.strip())


@dataclass(frozen=True, slots=True)
class MetaPropertiesEnsemble:
    """What every log directory holds: a file, no file (empty), or an unreadable file."""

    log_dir_props: Mapping[Path, MetaProperties]
    empty_log_dirs: tuple[Path, ...]
    error_log_dirs: Mapping[Path, str]  # directory -> why its file could not be read

    @classmethod
    def load(cls, log_dirs: Iterable[Path]) -> MetaPropertiesEnsemble:
        props: dict[Path, MetaProperties] = {}
        empty: list[Path] = []
        errors: dict[Path, str] = {}
        for directory in log_dirs:
            path = directory / META_PROPERTIES
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                empty.append(directory)
                continue
            except (OSError, UnicodeDecodeError) as error:
                errors[directory] = f"Error loading {path}: {error}"
                continue
            try:
                props[directory] = MetaProperties.from_properties(parse_properties(text), path)
            except MetaPropertiesError as error:
                errors[directory] = str(error)
        return cls(props, tuple(empty), errors)

    @property
    def cluster_id(self) -> str | None:
        return next((meta.cluster_id for meta in self.log_dir_props.values()), None)

    @property
    def node_id(self) -> int | None:
        return next((meta.node_id for meta in self.log_dir_props.values()), None)

    def verify(
        self, *, expected_cluster_id: str | None = None, expected_node_id: int | None = None
    ) -> None:
        """Every file agrees with the first one (or with the expected values), each names its
        own directory id; raise naming both files (or the file and where the value came from)."""
        cluster = (expected_cluster_id, "the cluster id being recorded")
        node = (expected_node_id, "node.id in the configuration")
        seen_directories: dict[str, Path] = {}
        for directory, meta in self.log_dir_props.items():
            path = directory / META_PROPERTIES
            cluster = _check_cluster_id(meta, path, cluster)
            node = _check_node_id(meta, path, node)
            if meta.directory_id is not None:
                previous = seen_directories.setdefault(meta.directory_id, directory)
                if previous != directory:
                    raise MetaPropertiesError(
                        f"Duplicate directory ID {meta.directory_id} found. It was the ID of "
                        f"{previous}, but also of {directory}")

    def raise_for_errors(self) -> None:
        """Samsa does not run with a log directory offline at start: an unreadable file stops
        start-up (Kafka would continue without that directory)."""
        for reason in self.error_log_dirs.values():
            raise MetaPropertiesError(reason)


def _check_cluster_id(
    meta: MetaProperties, path: Path, expected: tuple[str | None, str]
) -> tuple[str | None, str]:
    value, source = expected
    if value is None:
        return meta.cluster_id, f"cluster.id in {path}"
    if meta.cluster_id != value:
        raise InconsistentClusterIdError(
            f"Invalid cluster.id in: {path}. Expected {value}, but read {meta.cluster_id} "
            f"(expected from {source})")
    return expected


def _check_node_id(
    meta: MetaProperties, path: Path, expected: tuple[int | None, str]
) -> tuple[int | None, str]:
    value, source = expected
    if value is None:
        return meta.node_id, f"node.id in {path}"
    if meta.node_id != value:
        raise InconsistentNodeIdError(
            f"Stored node id {meta.node_id} doesn't match previous node id {value} in {path} "
            f"(previous node id from {source}). If you moved your data, make sure your "
            "configured node id matches. If you intend to create a new node, you should "
            "remove all data in your data directories.")
    return expected


def write_meta_properties(directory: Path, meta: MetaProperties) -> None:
    """Create ``directory`` if needed and replace its ``meta.properties``: temp, fsync, rename,
    then fsync the directory so the rename survives a crash."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / META_PROPERTIES
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "w", encoding="utf-8") as file:
        file.write(meta.to_text())
        file.flush()
        fsync(file.fileno(), temp)
    os.replace(temp, path)
    fsync_directory(directory)


def load_cluster_id(log_dirs: Iterable[Path], node_id: int, *, kraft: bool) -> str | None:
    """Start-up: read and verify every directory's file; the cluster id, or None (unknown)
    for a KRaft node whose directories hold no file yet. See the module docstring."""
    dirs = tuple(log_dirs)
    ensemble = MetaPropertiesEnsemble.load(dirs)
    ensemble.raise_for_errors()
    ensemble.verify(expected_node_id=node_id)
    cluster_id = ensemble.cluster_id
    if cluster_id is None and not kraft:
        cluster_id = random_uuid()
        logger.info("no meta.properties in %s: new cluster id %s",
                    ", ".join(map(str, dirs)), cluster_id)
    if cluster_id is None:
        logger.info("no meta.properties in %s: the cluster id is learnt from the quorum",
                    ", ".join(map(str, dirs)))
    else:
        _complete(ensemble, cluster_id, node_id)
    return cluster_id


def write_cluster_id(log_dirs: Iterable[Path], cluster_id: str, node_id: int) -> None:
    """Record the cluster id a KRaft node learnt from the quorum in every log directory.

    Idempotent for the same id; raises ``InconsistentClusterIdError`` (writing nothing) when a
    directory already belongs to another cluster, ``InconsistentNodeIdError`` for a file of
    another node, ``MetaPropertiesError`` for an unreadable file or a cluster id that is not a
    Kafka ``Uuid``.
    """
    try:
        parse_uuid(cluster_id)
    except ValueError as error:
        raise MetaPropertiesError(f"Cluster ID string {cluster_id} does not appear to be a "
                                  f"valid UUID: {error}") from None
    ensemble = MetaPropertiesEnsemble.load(tuple(log_dirs))
    ensemble.raise_for_errors()
    ensemble.verify(expected_cluster_id=cluster_id, expected_node_id=node_id)
    _complete(ensemble, cluster_id, node_id)


def _complete(ensemble: MetaPropertiesEnsemble, cluster_id: str, node_id: int) -> None:
    """A file for every directory without one; a directory id for every file without one."""
    used = {meta.directory_id for meta in ensemble.log_dir_props.values()}
    for directory, meta in ensemble.log_dir_props.items():
        if meta.directory_id is None:
            updated = replace(meta, directory_id=_new_directory_id(used))
            logger.info("adding directory.id %s to %s", updated.directory_id, directory)
            write_meta_properties(directory, updated)
    for directory in ensemble.empty_log_dirs:
        meta = MetaProperties(cluster_id, node_id, _new_directory_id(used))
        logger.info("writing %s in %s: cluster.id=%s node.id=%d", META_PROPERTIES, directory,
                    cluster_id, node_id)
        write_meta_properties(directory, meta)


def _new_directory_id(used: set[str | None]) -> str:
    while (directory_id := random_directory_id()) in used:
        pass
    used.add(directory_id)
    return directory_id
