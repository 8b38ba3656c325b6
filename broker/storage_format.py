"""``samsa storage format`` and ``info``: Kafka's ``kafka-storage.sh`` over ``meta.properties``.

``format_storage`` writes a v1 ``meta.properties`` (cluster id, node id, a new directory id)
into each log directory of a KRaft node's configuration that has none, and refuses, writing
nothing, when one already has a file (unless ``ignore_formatted``), when a file belongs to
another cluster or node, or when the configuration is Samsa's single node (which formats
itself at first start). Formatting is optional for a Samsa KRaft node: without it the node
learns the cluster id from the quorum (``broker.meta_properties``).

``describe_storage`` reports what the directories hold, with Kafka's problem lines.

Differences from Kafka: no ``bootstrap.checkpoint`` is written and no ``--release-version`` /
``--feature`` (Samsa has no feature levels yet), so the "Formatting ..." line names no
metadata.version; only a static quorum (``controller.quorum.voters``), so no
``--standalone`` / ``--initial-controllers``; an unreadable file stops ``format``.
The cluster id must be a Kafka ``Uuid`` (as ``kafka-storage.sh`` before 3.9 checked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker.config import BrokerConfig
from broker.meta_properties import (
    META_PROPERTIES,
    MetaProperties,
    MetaPropertiesEnsemble,
    MetaPropertiesError,
    parse_uuid,
    random_directory_id,
    write_meta_properties,
)

__all__ = ["FormatError", "StorageInfo", "describe_storage", "format_storage"]


class FormatError(Exception):
    """The format command refuses: one line saying why (Kafka's ``FormatterException``)."""


def format_storage(config: BrokerConfig, cluster_id: str, *, ignore_formatted: bool) -> list[str]:
    """Format the node's log directories; the lines to print. Raises ``FormatError``."""
    _check_can_format(config, cluster_id)
    directories = _directories(config)
    ensemble = MetaPropertiesEnsemble.load(directories)
    try:
        ensemble.verify(expected_cluster_id=cluster_id, expected_node_id=config.node_id)
    except MetaPropertiesError as error:
        raise FormatError(str(error)) from None
    if ensemble.log_dir_props and not ignore_formatted:
        first = min(ensemble.log_dir_props)
        raise FormatError(f"Log directory {first} is already formatted. Use --ignore-formatted "
                          "to ignore this directory and format the others.")
    lines = [f"I/O error trying to read log directory {directory}. Ignoring..."
             for directory in sorted(ensemble.error_log_dirs)]
    if not ensemble.empty_log_dirs:
        if not ensemble.log_dir_props:
            raise FormatError("No available log directories to format.")
        return [*lines, "All of the log directories are already formatted."]
    used = {meta.directory_id for meta in ensemble.log_dir_props.values()}
    for directory in sorted(ensemble.empty_log_dirs):
        directory_id = random_directory_id()
        while directory_id in used:
            directory_id = random_directory_id()
        used.add(directory_id)
        kind = "metadata directory" if directory == config.log_dirs[0] else "data directory"
        lines.append(f"Formatting {kind} {directory}.")
        write_meta_properties(directory, MetaProperties(cluster_id, config.node_id, directory_id))
    return lines


def _check_can_format(config: BrokerConfig, cluster_id: str) -> None:
    if not config.kraft.is_kraft:
        raise FormatError("The configuration file appears to be for Samsa's single node (no "
                          "process.roles), which formats its log directories at first start. "
                          "Formatting is only supported for clusters in KRaft mode.")
    if config.kraft.is_controller and not config.kraft.quorum.voters:
        raise FormatError("Because controller.quorum.voters is not set on this controller, it "
                          "cannot be formatted: Samsa supports only a static quorum "
                          "(--standalone and --initial-controllers are not implemented).")
    try:
        parse_uuid(cluster_id)
    except ValueError as error:
        raise FormatError(f"Cluster ID string {cluster_id} does not appear to be a valid "
                          f"UUID: {error}") from None


def _directories(config: BrokerConfig) -> list[Path]:
    """Kafka's ``configToLogDirectories``: the log directories, each once, sorted."""
    return sorted(set(config.log_dirs))


@dataclass(frozen=True, slots=True)
class StorageInfo:
    """What ``samsa storage info`` reports (Kafka's ``infoCommand``)."""

    directories: tuple[str, ...]  # the ones found
    metadata: dict[str, str] | None  # the first file's keys, sorted
    problems: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def to_lines(self) -> list[str]:
        lines: list[str] = []
        if self.directories:
            plural = "y" if len(self.directories) == 1 else "ies"
            lines += [f"Found log director{plural}:", *(f"  {d}" for d in self.directories), ""]
        if self.metadata is not None:
            text = ", ".join(f"{key}={value}" for key, value in self.metadata.items())
            lines += [f"Found metadata: {{{text}}}", ""]
        if self.problems:
            lines += ["Found problem:" if len(self.problems) == 1 else "Found problems:",
                      *(f"  {problem}" for problem in self.problems), ""]
        return lines

    def to_document(self) -> dict[str, object]:
        return {"directories": list(self.directories), "metadata": self.metadata,
                "problems": list(self.problems)}


def describe_storage(config: BrokerConfig) -> StorageInfo:
    problems: list[str] = []
    found: list[str] = []
    first: MetaProperties | None = None
    for directory in _directories(config):
        if not directory.is_dir():
            what = "is not a directory" if directory.exists() else "does not exist"
            problems.append(f"{directory} {what}")
            continue
        found.append(str(directory))
        ensemble = MetaPropertiesEnsemble.load([directory])
        if directory in ensemble.empty_log_dirs:
            problems.append(f"{directory} is not formatted.")
        elif directory in ensemble.error_log_dirs:
            reason = ensemble.error_log_dirs[directory]
            path = directory / META_PROPERTIES
            problems.append(reason if reason.startswith("Error loading") else
                            f"Error loading {path}: {reason}")
        else:
            meta = ensemble.log_dir_props[directory]
            if first is None:
                first = meta
            elif meta.cluster_id != first.cluster_id:
                problems.append("Mismatched cluster IDs between storage directories.")
            elif meta.node_id != first.node_id:
                problems.append("Mismatched node IDs between storage directories.")
    metadata = None if first is None else dict(sorted(first.to_properties().items()))
    return StorageInfo(tuple(found), metadata, tuple(problems))
