"""``replication-offset-checkpoint``: each partition's high watermark, one file per log
directory (Kafka's ``ReplicaManager.highWatermarkCheckpoints``).

Layout: Kafka's offset checkpoint text format (``storage.checkpoint.OffsetCheckpointFile``)::

    0
    2
    orders 0 1234
    orders 1 987

Written by ``write`` every ``replica.high.watermark.checkpoint.interval.ms`` (5000) and at a
clean stop (Kafka's ``checkpointHighWatermarks``): for every online directory, the high
watermarks of the partitions whose logs live there (temp file, fsync, rename). Read once at
start, before the partitions are opened: a partition starts from its checkpointed high
watermark, bounded by its log (Kafka's ``Partition.createLog`` and
``UnifiedLog.updateHighWatermark``), taken from the file in its log's own directory; a
partition missing from that file starts at 0. A leader
whose ISR is itself alone then moves it to its log end offset at once (``maybeIncrementLeaderHW``),
which on a single node is every partition.

A file that cannot be read or written (an I/O error) takes its log directory offline, as Kafka's
``CheckpointFileWithFailureHandler`` does: the partitions there answer KAFKA_STORAGE_ERROR, the
other directories go on. A malformed file (a damaged disk: the error names the file and the line)
is logged as an ERROR and read as empty, so each of its partitions starts at 0 like one missing
from the file. That is safe: a high watermark only delays what consumers see, the leader raises it
again as the ISR fetches, and followers truncate by leader epoch, never by it. Kafka instead takes
the directory offline (and halts when it holds the metadata log), which leaves a damaged
replica nothing to heal from: a Samsa deviation, for issue 13's disk faults (G8).

Reads run before serving; writes run on the storage worker (they read each partition's high
watermark, an int, as retention does).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from storage.errors import CorruptCheckpointError
from storage.log_manager import LogManager

__all__ = ["HighWatermarkCheckpoints"]

logger = logging.getLogger("samsa.replication.high_watermark_checkpoint")

TopicPartition = tuple[str, int]


class HighWatermarkCheckpoints:
    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager

    def path(self, directory: Path) -> Path:
        return directory / REPLICATION_OFFSET_CHECKPOINT

    def read(self) -> dict[TopicPartition, int]:
        """Every online directory's checkpointed high watermarks; a directory whose file is
        unreadable goes offline (see the module docstring)."""
        high_watermarks: dict[TopicPartition, int] = {}
        for directory in self._online_directories():
            try:
                entries = OffsetCheckpointFile(self.path(directory)).read()
            except CorruptCheckpointError as error:
                logger.error("%s; every partition of %s starts from high watermark 0",
                             error, directory)
                continue
            except OSError as error:
                self._take_offline(directory, f"error while reading checkpoint file: {error}")
                continue
            high_watermarks.update(  # a log's entry is the one in its own directory's file
                (key, offset) for key, offset in entries.items() if self._directory_of(key) == directory)
        return high_watermarks

    def write(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Replace each online directory's file with the high watermarks of its logs."""
        by_directory: dict[Path, dict[TopicPartition, int]] = {
            directory: {} for directory in self._online_directories()}
        for key, high_watermark in high_watermarks.items():
            directory = self._directory_of(key)
            if directory in by_directory:
                by_directory[directory][key] = high_watermark
        for directory, entries in by_directory.items():
            try:
                OffsetCheckpointFile(self.path(directory)).write(entries)
            except OSError as error:
                self._take_offline(directory, f"error while writing checkpoint file: {error}")

    def _directory_of(self, key: TopicPartition) -> Path | None:
        return self.log_manager.directory_of(key)  # a log still loading too

    def _online_directories(self) -> list[Path]:
        health = self.log_manager.health
        return [directory for directory in self.log_manager.log_dirs
                if health[directory].offline_reason is None]

    def _take_offline(self, directory: Path, reason: str) -> None:
        logger.error("log directory %s goes offline: %s", directory, reason)
        self.log_manager.health[directory].offline_reason = reason
