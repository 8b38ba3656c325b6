"""All partition logs of a broker, over the directories of ``log.dirs``.

Layout of each log directory (Kafka's):

    <log.dir>/.kafka_cleanshutdown              present only between a clean stop and the next start
                                                (the stopping broker's epoch: storage.clean_shutdown)
    <log.dir>/recovery-point-offset-checkpoint  topic partition offset, per log
    <log.dir>/log-start-offset-checkpoint       topic partition offset, per log
    <log.dir>/<topic>-<partition>/               one Log (its partition.metadata: the topic id)
    <log.dir>/<topic>-<partition>.<id>-delete/   a deleted partition awaiting removal
    <log.dir>/<topic>-<partition>.<id>-stray/    a log set aside as not this broker's: never
                                                 loaded, never deleted (left to the operator)

Start-up reads the marker and checkpoints, then loads every log (one thread per directory, up to
``num.recovery.threads.per.data.dir`` each), recovering from the recovery point when the marker is
missing; the marker is removed once loading is done, so a crash later means an unclean start.

Loading in the background (issue 18): ``startup(background_above=N)`` with more than N logs in
all directories loads only the logs ``load_now`` names (the broker's internal topics) and
leaves the others in ``unloaded``, each with what its load needs (path, checkpointed recovery
point and log start offset, whether its directory was shut down cleanly). The broker opens its
listeners and loads them afterwards (``load_unloaded`` on its storage worker, ``add_log`` on
the loop). Until then an unloaded log keeps its checkpointed offsets in every checkpoint, and a
directory keeps its unclean state: a clean stop writes no clean-shutdown marker in a directory
that still holds an unloaded log it has not recovered (the next start recovers it then).

Topic ids (``partition.metadata``, see ``storage.partition_metadata``): the manager reads and
writes them on the broker's behalf and remembers them (``topic_ids``); the broker, which knows the
metadata image, decides what a missing or different id means (``set_aside_stray`` for a log that
belongs to an older topic of the same name). A log created with a topic id gets its file before
anything can be appended to it.

Creating and deleting a log come in two halves, so the broker can do the disk work off its event
loop at a cost independent of the number of logs (issue 18):
- the owner's half (``choose_directory``, ``add_log``, ``detach_log``) touches no file and costs
  O(log.dirs): ``choose_directory`` places a new log in the online directory holding the fewest
  (counted as logs are placed, loaded and removed, never by a scan);
- the disk half (``open_new_log``: mkdir, segment files, ``partition.metadata``;
  ``remove_log_files``: close, rename ``-delete``, cleaner checkpoints once per directory;
  ``purge_directories``: the removal) may run on a storage worker; the log is not in ``logs``
  then, so nothing else reaches it. ``get_or_create_log`` and ``delete_log`` do both halves
  inline (start-up, tools, tests).

Descriptors and maps (``storage.open_files``, ``storage.limits``): every log shares the manager's
LRU of open segment files (``log.segment.open.files.max``; -1: half of ``RLIMIT_NOFILE``) and of
mapped indexes (half of ``vm.max_map_count``). ``startup`` raises ``RLIMIT_NOFILE`` to its hard
limit and logs both limits with what the partitions need. A log that cannot be loaded (a process
limit, an unreadable file) is kept offline with the reason, its checkpointed offsets kept; the
other logs load and are served.

The manager is synchronous; the broker schedules ``flush_due_logs``, ``checkpoint``,
``run_retention`` and ``purge_deleted`` (and the cleaner) and runs them off the event loop.
Those read ``logs`` from the worker while the loop adds and removes entries: they iterate over a
copy (``list(...)``, taken atomically under the GIL), never over the live dict.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from uuid import UUID

from protocol.errors import InconsistentTopicIdError, KafkaError, KafkaStorageError
from storage.checkpoint import OffsetCheckpointFile
from storage.clean_shutdown import CLEAN_SHUTDOWN_FILE, read_broker_epoch, write_clean_shutdown
from storage.cleaner import (
    Cleaner,
    CleanerStats,
    OffsetMap,
    cleanable_logs,
    cleaner_checkpoint_file,
    remove_cleaner_checkpoint,
    remove_cleaner_checkpoints,
    truncate_cleaner_checkpoint,
)
from storage.clock import Clock
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError, CorruptPartitionMetadataError
from storage.fsync import fsync_directory
from storage.limits import (
    ProcessLimits,
    current_limits,
    default_index_maps_max,
    default_open_files_max,
    is_resource_limit,
    raise_open_files_limit,
    report_limits,
    resource_limit_message,
)
from storage.log import Log
from storage.log_dirs import (
    DELETE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    DirectoryHealth,
    aside_directory_name,
    parse_topic_partition,
)
from storage.open_files import LeastRecentlyUsed
from storage.partition_metadata import (
    read_partition_metadata,
    topic_id_to_string,
    write_partition_metadata,
)
from storage.verification import VERIFY_UNCLEAN

logger = logging.getLogger("samsa.storage.log_manager")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

TopicPartition = tuple[str, int]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class UnloadedLog:
    """A log found at start-up and left for loading in the background (see the module
    docstring): what ``load_unloaded`` needs. Immutable: the worker reads it while the loop
    owns ``LogManager.unloaded``."""

    key: TopicPartition
    path: Path
    recovery_point: int
    log_start_offset: int
    clean: bool  # its directory was shut down cleanly (no recovery needed)

    @property
    def log_dir(self) -> Path:
        return self.path.parent


@dataclass(slots=True)
class _ScannedDirectory:
    """One log directory at start-up, before its logs are loaded."""

    directory: Path
    clean: bool
    recovery_points: dict[TopicPartition, int]
    start_offsets: dict[TopicPartition, int]
    partition_dirs: list[Path]


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        *,
        default_config: LogConfig | None = None,
        clock: Clock,
        topic_config: Callable[[str], LogConfig] | None = None,
        recovery_threads_per_dir: int = 2,
        cleaner_dedupe_buffer_bytes: int = 128 * 1024 * 1024,
        segment_open_files_max: int = -1,
        verify_on_startup: str = VERIFY_UNCLEAN,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.clock = clock
        self._topic_config = topic_config or (lambda topic: self.default_config)
        self._threads = recovery_threads_per_dir
        self._open_files_max = segment_open_files_max
        self._verify_on_startup = verify_on_startup  # samsa.log.verify.on.startup
        limits = current_limits()
        self.open_files = LeastRecentlyUsed(self._open_files_cap(limits))
        self.index_maps = LeastRecentlyUsed(default_index_maps_max(limits))
        self.health = {d: DirectoryHealth(d) for d in self.log_dirs}
        self.logs: dict[TopicPartition, Log] = {}
        # Logs placed in each directory (loaded, or chosen for a new log, and not yet removed):
        # what ``choose_directory`` balances, kept up to date instead of counted by a scan.
        self._placed: Counter[Path] = Counter()
        # The topic id of each log's partition.metadata, once read or written.
        self.topic_ids: dict[TopicPartition, UUID] = {}
        self.cleaner = Cleaner(offset_map=OffsetMap(cleaner_dedupe_buffer_bytes))
        # Log directories with logs that were not shut down cleanly at the last start-up.
        self.unclean_directories: set[Path] = set()
        # The broker epoch each directory's clean-shutdown marker held at start-up (None: none).
        self._shutdown_epochs: dict[Path, int | None] = {}
        # Logs whose cleaning failed (corrupt data): skipped until restart, as Kafka's
        # "uncleanable partitions".
        self.uncleanable: set[TopicPartition] = set()
        # Logs found at start-up and not loaded yet (see the module docstring); owned by the
        # loop: ``add_log`` of the loaded log, or ``forget_unloaded`` at its deletion, ends one.
        self.unloaded: dict[TopicPartition, UnloadedLog] = {}
        self._set_aside_lock = threading.Lock()

    # -- start-up -----------------------------------------------------------------------------

    def startup(self, *, background_above: int = -1,
                load_now: Callable[[str], bool] = lambda topic: True) -> None:
        """Load every log; in parallel across directories and within each. With more than
        ``background_above`` logs in all (-1: never), only those of the topics ``load_now``
        names; the others wait in ``unloaded`` (see the module docstring)."""
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        limits = raise_open_files_limit()
        self.open_files.capacity = self._open_files_cap(limits)
        with ThreadPoolExecutor(max_workers=len(self.log_dirs)) as pool:
            scanned = list(pool.map(self._scan_directory, self.log_dirs))
            found = sum(len(directory.partition_dirs) for directory in scanned)
            defer = 0 <= background_above < found
            for directory, loaded in zip(self.log_dirs, pool.map(
                    lambda d: self._load_directory(d, load_now if defer else None), scanned),
                    strict=True):
                self.logs.update(loaded)
                self._placed[directory] += len(loaded)
        for entry in self.unloaded.values():
            self._placed[entry.log_dir] += 1
        if self.unloaded:
            logger.info("%d logs loaded; %d more are loaded in the background once the broker "
                        "serves (more than samsa.log.background.load.above=%d)",
                        len(self.logs), len(self.unloaded), background_above)
        report_limits(
            limits, partitions=len(self.logs) + len(self.unloaded),
            open_files_max=self.open_files.capacity,
            segments=sum(len(log.segments) for log in self.logs.values()) + len(self.unloaded),
            index_maps_max=self.index_maps.capacity,
        )

    def _open_files_cap(self, limits: ProcessLimits) -> int:
        configured = self._open_files_max
        return configured if configured > 0 else default_open_files_max(limits)

    def _scan_directory(self, directory: Path) -> _ScannedDirectory:
        """The directory's clean-shutdown marker, checkpoints and partition directories."""
        clean = (directory / CLEAN_SHUTDOWN_FILE).exists()
        self._shutdown_epochs[directory] = read_broker_epoch(directory) if clean else None
        recovery_points = _read_or_forget(directory / RECOVERY_POINT_CHECKPOINT)
        start_offsets = _read_or_forget(directory / LOG_START_OFFSET_CHECKPOINT)
        if recovery_points is None:
            clean = False  # no trustworthy recovery points: scan every segment
        partition_dirs = list(self._partition_directories(directory))
        if not clean and partition_dirs:
            logger.warning("%s was not shut down cleanly: recovering its logs", directory)
            self.unclean_directories.add(directory)
        return _ScannedDirectory(directory, clean, recovery_points or {}, start_offsets or {},
                                 partition_dirs)

    def _load_directory(self, scanned: _ScannedDirectory,
                        load_now: Callable[[str], bool] | None) -> dict[TopicPartition, Log]:
        """Load the scanned directory's logs (those of the topics ``load_now`` names, the
        others into ``unloaded``; None: all); then remove its clean-shutdown marker."""
        to_load = []
        for path in scanned.partition_dirs:
            key = parse_topic_partition(path.name)
            if load_now is None or load_now(key[0]):
                to_load.append(path)
            else:
                self.unloaded[key] = UnloadedLog(
                    key, path, scanned.recovery_points.get(key, 0),
                    scanned.start_offsets.get(key, 0), scanned.clean)

        def load(path: Path) -> Log:
            key = parse_topic_partition(path.name)
            return self._open_found(UnloadedLog(
                key, path, scanned.recovery_points.get(key, 0),
                scanned.start_offsets.get(key, 0), scanned.clean))

        with ThreadPoolExecutor(max_workers=max(1, self._threads)) as pool:
            logs = list(pool.map(load, to_load))
        (scanned.directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        return {(log.topic, log.partition): log for log in logs}

    def _open_found(self, entry: UnloadedLog, *, preread: bool = True) -> Log:
        """Load (recovering if needed) a log found on disk; one that fails is kept offline.
        ``preread``: read its topic id too (``_preread_topic_id``)."""
        try:
            log = Log.open(
                entry.path,
                self._topic_config(entry.key[0]),
                clock=self.clock,
                recovery_point=entry.recovery_point,
                log_start_offset=entry.log_start_offset,
                had_clean_shutdown=entry.clean,
                health=self.health[entry.log_dir],
                open_files=self.open_files,
                index_maps=self.index_maps,
                verify_on_startup=self._verify_on_startup,
            )
        except Exception as error:
            return self._offline_log(entry.path, error, entry.recovery_point,
                                     entry.log_start_offset)
        if preread:
            self._preread_topic_id(entry.key, entry.path)
        return log

    # -- logs loaded in the background (see the module docstring) -----------------------------

    def load_unloaded_many(
        self, loads: Sequence[tuple[UnloadedLog, LogConfig, UUID]],
    ) -> list[Log | KafkaError | OSError]:
        """``load_unloaded`` of each; with a log to recover (its directory was not shut down
        cleanly), in parallel: up to ``num.recovery.threads.per.data.dir`` threads for each
        directory they are in, as start-up loads (recovery waits on the disk as much as it
        computes: 5,000 logs of 40 batches, 15.1 s in one thread, 12.1 s in two). Clean loads
        stay in one thread: they are Python work, and two threads contending for the GIL took
        50 % longer (20,000 logs: 6.3 s against 9.4 s). Each result is the log, or the error
        its load raised, in the order given."""
        def load(item: tuple[UnloadedLog, LogConfig, UUID]) -> Log | KafkaError | OSError:
            try:
                return self.load_unloaded(*item)
            except (KafkaError, OSError) as error:
                return error

        recovering = sum(1 for entry, _, _ in loads if not entry.clean)
        threads = max(1, self._threads) * len({entry.log_dir for entry, _, _ in loads})
        threads = min(threads, len(loads)) if recovering else 1
        logger.debug("loading %d logs (%d to recover) on %d thread(s)", len(loads), recovering,
                     threads)
        if threads == 1:
            return [load(item) for item in loads]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="samsa-log-load") as pool:
            return list(pool.map(load, loads))

    def load_unloaded(self, entry: UnloadedLog, config: LogConfig, topic_id: UUID) -> Log:
        """Disk half (any thread): load ``entry``'s log as start-up would have, and check its
        ``partition.metadata`` against ``topic_id`` as the broker does at start-up: written
        when missing; when malformed or naming another topic id, the log is set aside as
        stray (never served, never deleted) and a new, empty one is created in its place. Not
        added to ``logs`` (``add_log`` on the loop)."""
        log = self._open_found(entry, preread=False)
        log.config = config
        if log.health.offline_reason is not None:
            return log
        try:
            stored = self._on_disk(log, lambda: read_partition_metadata(log.directory))
        except CorruptPartitionMetadataError as error:
            self.topic_ids.pop(entry.key, None)
            aside = self._set_aside(log)
            logger.error("%s; the log of %s-%d is not served: renamed to %s, a new one is "
                         "created and refetched from the leader", error, *entry.key, aside)
        else:
            if stored is None:
                self._on_disk(log, lambda: write_partition_metadata(log.directory, topic_id))
                self.topic_ids[entry.key] = topic_id
                return log
            if stored.topic_id == topic_id:
                self.topic_ids[entry.key] = topic_id
                return log
            self.topic_ids.pop(entry.key, None)
            directory = log.directory
            aside = self._set_aside(log)
            logger.warning(
                "log %s has topic id %s but topic %s has topic id %s in the metadata image "
                "(deleted and re-created while this log was elsewhere): not served; "
                "renamed to %s", directory, topic_id_to_string(stored.topic_id), entry.key[0],
                topic_id_to_string(topic_id), aside)
        return self.open_new_log(entry.log_dir, *entry.key, config, topic_id=topic_id)

    def forget_unloaded(self, key: TopicPartition) -> UnloadedLog | None:
        """Owner's half of deleting a log not loaded yet: no longer in ``unloaded`` (its
        directory is the caller's to remove: ``remove_log_files``)."""
        entry = self.unloaded.pop(key, None)
        if entry is not None:
            self._placed[entry.log_dir] -= 1
        return entry

    def set_aside_unloaded(self, key: TopicPartition) -> Path:
        """A found log never loaded, renamed ``<topic>-<partition>.<id>-stray`` (never loaded
        or served, never deleted); returns the new path."""
        entry = self.unloaded[key]
        target = entry.path.with_name(aside_directory_name(*key, STRAY_DIR_SUFFIX))
        entry.path.rename(target)
        self.forget_unloaded(key)
        try:
            remove_cleaner_checkpoint(entry.log_dir, key)
        except CorruptCheckpointError as error:
            logger.error("dropping the cleaner checkpoint of %s-%d failed: %s", *key, error)
        return target

    def directory_of(self, key: TopicPartition) -> Path | None:
        """The log directory holding ``key``'s log, loaded or not (None: none here)."""
        log = self.logs.get(key)
        if log is not None:
            return log.directory.parent
        entry = self.unloaded.get(key)
        return None if entry is None else entry.log_dir

    def _preread_topic_id(self, key: TopicPartition, path: Path) -> None:
        """Read ``partition.metadata`` on the loading thread, so that checking it against the
        metadata image (``read_topic_id``, on the event loop) costs no disk read; a missing or
        malformed file is left for ``read_topic_id`` to report."""
        try:
            metadata = read_partition_metadata(path)
        except (CorruptPartitionMetadataError, OSError):
            return
        if metadata is not None:
            self.topic_ids[key] = metadata.topic_id

    def _offline_log(
        self, path: Path, error: Exception, recovery_point: int, log_start_offset: int
    ) -> Log:
        """A log that failed to load: offline with the reason until restart, its checkpointed
        offsets kept so the next checkpoint does not lose them."""
        if isinstance(error, OSError) and is_resource_limit(error):
            reason = resource_limit_message(error)
        else:
            reason = f"{type(error).__name__}: {error}"
        logger.error("log %s could not be loaded and stays offline: %s", path, reason,
                     exc_info=not isinstance(error, OSError))
        key = parse_topic_partition(path.name)
        log = Log(path, self._topic_config(key[0]), clock=self.clock,
                  health=DirectoryHealth(path, offline_reason=reason),
                  open_files=self.open_files, index_maps=self.index_maps)
        log.recovery_point, log.log_start_offset = recovery_point, log_start_offset
        log.log_end_offset = max(recovery_point, log_start_offset)
        return log

    def _partition_directories(self, directory: Path) -> Iterator[Path]:
        for path in sorted(directory.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("removing deleted partition directory %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if path.name.endswith(STRAY_DIR_SUFFIX):
                logger.warning("not loading stray partition directory %s (set aside earlier; "
                               "delete it once its data is not needed)", path)
                continue
            try:
                parse_topic_partition(path.name)
            except ValueError:
                logger.warning("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            yield path

    # -- logs ---------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        topic_id: UUID | None = None,
    ) -> Log:
        """The partition's log, created when absent. With ``topic_id``: a new log gets its
        ``partition.metadata`` at once; an existing one without a file gets it, and one whose
        file names another id raises INCONSISTENT_TOPIC_ID (as Kafka's ``getOrCreateLog``)."""
        existing = self.logs.get((topic, partition))
        if existing is not None:
            if topic_id is not None and existing.health.offline_reason is None:
                self._check_topic_id(existing, topic_id)
            return existing
        directory = self.choose_directory()
        try:
            log = self.open_new_log(directory, topic, partition,
                                    config or self._topic_config(topic), topic_id=topic_id)
        except BaseException:
            self.release_directory(directory)
            raise
        self.add_log(log, topic_id=topic_id)
        return log

    # -- creation and deletion in halves (see the module docstring) ---------------------------

    def choose_directory(self) -> Path:
        """The online directory with the fewest logs, counted as holding one more from now on
        (``release_directory`` if the log is not created after all). O(log.dirs)."""
        online = [d for d in self.log_dirs if self.health[d].offline_reason is None]
        if not online:
            raise KafkaStorageError("every log directory is offline")
        chosen = min(online, key=lambda d: (self._placed[d], str(d)))
        self._placed[chosen] += 1
        return chosen

    def release_directory(self, directory: Path) -> None:
        self._placed[directory] -= 1

    def open_new_log(
        self, directory: Path, topic: str, partition: int, config: LogConfig,
        *, topic_id: UUID | None = None,
    ) -> Log:
        """Disk half (any thread): open ``<directory>/<topic>-<partition>``, creating it, and
        write its ``partition.metadata`` before anything can be appended. Not added to
        ``logs``. An OSError opening the log is raised as is (that partition only); one writing
        ``partition.metadata`` takes the directory offline (KAFKA_STORAGE_ERROR)."""
        self.health[directory].check()
        log = Log.open(directory / f"{topic}-{partition}", config, clock=self.clock,
                       had_clean_shutdown=True, health=self.health[directory],
                       open_files=self.open_files, index_maps=self.index_maps)
        # The new directory's entry in the log directory: durable before anything is acked.
        self._on_disk(log, lambda: fsync_directory(directory))
        if topic_id is not None:
            self._on_disk(log, lambda: write_partition_metadata(log.directory, topic_id))
        return log

    def add_log(self, log: Log, *, topic_id: UUID | None = None) -> None:
        """Owner's half: serve ``log`` (opened by ``open_new_log``, its directory chosen, or by
        ``load_unloaded``: then no longer in ``unloaded``)."""
        key = (log.topic, log.partition)
        self.logs[key] = log
        self.unloaded.pop(key, None)
        if topic_id is not None:
            self.topic_ids[key] = topic_id

    def detach_log(self, topic: str, partition: int) -> Log | None:
        """Owner's half of a deletion: forget the log (None: there was none); its files are
        the caller's to remove (``remove_log_files``)."""
        key = (topic, partition)
        log = self.logs.pop(key, None)
        if log is None:
            return None
        self.topic_ids.pop(key, None)
        self._placed[log.directory.parent] -= 1
        return log

    def remove_log_files(self, logs: Sequence[Log],
                         unloaded: Sequence[UnloadedLog] = ()) -> list[Path]:
        """Disk half (any thread): close each detached log, rename it ``<name>.<id>-delete``
        and drop its cleaner checkpoint (one rewrite per directory); ``unloaded``: logs never
        loaded (``forget_unloaded``), renamed the same way. Returns the new paths for
        ``purge_directories``. A failure is logged and the other logs go on."""
        doomed: list[tuple[TopicPartition, Path]] = []
        for log in logs:
            try:
                log.close()
            except (KafkaError, OSError) as error:
                logger.error("deleting %s failed: %s", log.directory, error)
                continue
            doomed.append(((log.topic, log.partition), log.directory))
        doomed.extend((entry.key, entry.path) for entry in unloaded)
        by_directory: dict[Path, list[TopicPartition]] = {}
        aside = []
        for key, directory in doomed:
            target = directory.with_name(aside_directory_name(*key, DELETE_DIR_SUFFIX))
            try:
                directory.rename(target)
            except OSError as error:
                logger.error("deleting %s failed: %s", directory, error)
                continue
            by_directory.setdefault(directory.parent, []).append(key)
            aside.append(target)
        for directory, keys in by_directory.items():
            try:
                remove_cleaner_checkpoints(directory, keys)
            except (CorruptCheckpointError, OSError) as error:
                logger.error("dropping cleaner checkpoints in %s failed: %s", directory, error)
        return aside

    @staticmethod
    def purge_directories(paths: Iterable[Path]) -> None:
        """Disk half (any thread): remove directories set aside for deletion."""
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    def _check_topic_id(self, log: Log, topic_id: UUID) -> None:
        stored = self.read_topic_id(log.topic, log.partition)
        if stored is None:
            self.write_topic_id(log.topic, log.partition, topic_id)
        elif stored != topic_id:
            raise InconsistentTopicIdError(
                f"log {log.directory} has topic id {topic_id_to_string(stored)}, "
                f"not {topic_id_to_string(topic_id)}"
            )

    # -- topic ids (partition.metadata) -------------------------------------------------------

    def read_topic_id(self, topic: str, partition: int) -> UUID | None:
        """The topic id in the log's ``partition.metadata``; None when it has none. Raises
        CorruptPartitionMetadataError (naming the file) when the file is malformed."""
        key = (topic, partition)
        if key not in self.topic_ids:
            log = self.logs[key]
            metadata = self._on_disk(log, lambda: read_partition_metadata(log.directory))
            if metadata is None:
                return None
            self.topic_ids[key] = metadata.topic_id
        return self.topic_ids[key]

    def write_topic_id(self, topic: str, partition: int, topic_id: UUID) -> None:
        """Write the log's ``partition.metadata`` (temp file, fsync, rename)."""
        log = self.logs[(topic, partition)]
        self._on_disk(log, lambda: write_partition_metadata(log.directory, topic_id))
        self.topic_ids[(topic, partition)] = topic_id

    def take_offline(self, topic: str, partition: int, reason: str) -> None:
        """Stop serving one log (every call on it raises KAFKA_STORAGE_ERROR) until restart;
        the rest of its log directory stays online."""
        log = self.logs[(topic, partition)]
        log.health = DirectoryHealth(log.directory, offline_reason=reason)

    def set_aside_stray(self, topic: str, partition: int) -> Path:
        """Close the log and rename its directory ``<topic>-<partition>.<id>-stray``: never
        loaded or served again, never deleted (Kafka keeps stray logs for the operator).
        Returns the new path; the partition has no log until one is created."""
        key = (topic, partition)
        log = self.logs.pop(key)
        self.topic_ids.pop(key, None)
        self._placed[log.directory.parent] -= 1
        return self._set_aside(log)

    def _set_aside(self, log: Log) -> Path:
        """Close ``log`` (detached) and rename its directory ``<topic>-<partition>.<id>-stray``."""
        log.close()
        with self._set_aside_lock:  # parallel loads: one rewrite of a directory's file at a time
            remove_cleaner_checkpoint(log.directory.parent, (log.topic, log.partition))
        target = log.directory.with_name(
            aside_directory_name(log.topic, log.partition, STRAY_DIR_SUFFIX))
        self._on_disk(log, lambda: log.directory.rename(target))
        return target

    def _on_disk(self, log: Log, action: Callable[[], T]) -> T:
        """Run a file operation on ``log``'s directory; an OSError takes it offline (sticky)."""
        log.health.check()
        try:
            return action()
        except OSError as error:
            log.health.offline_reason = f"{type(error).__name__}: {error}"
            logger.error("I/O error in %s; log directory goes offline: %s", log.directory, error)
            raise KafkaStorageError(f"I/O error in {log.directory}: {error}") from error

    def delete_log(self, topic: str, partition: int) -> bool:
        """Both halves inline: close the log, move its directory aside, remove it."""
        log = self.detach_log(topic, partition)
        if log is None:
            return False
        self.purge_directories(self.remove_log_files([log]))
        return True

    # -- scheduled work -----------------------------------------------------------------------

    def flush_due_logs(self) -> int:
        """flush.ms: flush every log whose interval has passed; returns how many were flushed."""
        due = [log for log in self._online_logs() if log.flush_is_due()]
        for log in due:
            log.flush()
        return len(due)

    def run_retention(self, high_watermarks: dict[TopicPartition, int] | None = None) -> int:
        deleted = 0
        for key, log in self._online_items():
            if not log.maintenance_lock.acquire(blocking=False):
                continue  # being cleaned: its retention waits for the next check
            try:
                hw = None if high_watermarks is None else high_watermarks.get(key)
                deleted += log.delete_old_segments(high_watermark=hw)
            finally:
                log.maintenance_lock.release()
        return deleted

    def write_key_indexes(self) -> int:
        """Key index files of segments rolled since the last call, in logs read by key
        (``storage.log_keys``); returns how many were written."""
        return sum(log.write_key_indexes() for log in self._online_logs())

    def purge_deleted(self) -> int:
        return sum(log.purge_deleted_segments() for log in self._online_logs())

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """Truncate a log (replication) and pull its cleaner checkpoint back with it."""
        log = self.logs[(topic, partition)]
        truncated = log.truncate_to(offset)
        if truncated:
            truncate_cleaner_checkpoint(log.directory.parent, (topic, partition), offset)
        return truncated

    def clean_dirtiest_log(
        self, high_watermarks: dict[TopicPartition, int] | None = None
    ) -> CleanerStats | None:
        """One cleaner round on the compacted log most in need of it; None when none is."""
        now_ms = self.clock.milliseconds()
        for directory in self.log_dirs:
            if self.health[directory].offline_reason is not None:
                continue
            logs = [
                log for key, log in self._online_items()
                if log.directory.parent == directory and key not in self.uncleanable
            ]
            checkpoints = cleaner_checkpoint_file(directory).read()
            candidates = cleanable_logs(
                logs, now_ms=now_ms, checkpoints=checkpoints, high_watermarks=high_watermarks
            )
            if candidates:
                return self._clean(candidates[0].log, now_ms, high_watermarks)
        return None

    def _clean(
        self, log: Log, now_ms: int, high_watermarks: dict[TopicPartition, int] | None
    ) -> CleanerStats | None:
        key = (log.topic, log.partition)
        high_watermark = None if high_watermarks is None else high_watermarks.get(key)
        try:
            with log.maintenance_lock:
                return self.cleaner.clean(log, now_ms=now_ms, high_watermark=high_watermark)
        except KafkaError as error:
            logger.error("cleaning %s-%d failed; it is skipped until restart: %s", *key, error)
            self.uncleanable.add(key)
            return None

    def checkpoint(self) -> None:
        """Write both offset checkpoints for every online directory (temp + fsync + rename)."""
        # ``unloaded`` first: a log the loop moves to ``logs`` meanwhile is then in both copies.
        unloaded = list(self.unloaded.values())
        loaded = list(self.logs.values())
        for directory in self.log_dirs:
            if self.health[directory].offline_reason is not None:
                continue
            waiting = [entry for entry in unloaded if entry.log_dir == directory]
            logs = [log for log in loaded if log.directory.parent == directory]
            recovery_points = {entry.key: entry.recovery_point for entry in waiting}
            recovery_points.update(((log.topic, log.partition), log.recovery_point) for log in logs)
            start_offsets = {entry.key: entry.log_start_offset for entry in waiting}
            start_offsets.update(((log.topic, log.partition), log.log_start_offset) for log in logs)
            OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).write(recovery_points)
            OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT).write(start_offsets)

    @property
    def previous_broker_epoch(self) -> int:
        """The broker epoch the last clean stop wrote in every directory's marker: -1 when one
        has none, an offline directory included, or they differ (Kafka's
        ``readBrokerEpochFromCleanShutdownFiles``)."""
        epochs = {self._shutdown_epochs.get(d) for d in self.log_dirs}
        offline = any(self.health[d].offline_reason is not None for d in self.log_dirs)
        epoch = epochs.pop() if len(epochs) == 1 else None
        return -1 if epoch is None or offline else epoch

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Clean stop: close (flush) every log, checkpoint, then write the clean-shutdown marker
        with ``broker_epoch`` (the stopping incarnation's; -1 without a controller)."""
        for log in self._online_logs():
            log.close()
        self.checkpoint()
        # A directory still holding a log it has not recovered stays unclean (next start).
        unrecovered = {entry.log_dir for entry in self.unloaded.values() if not entry.clean}
        for directory in self.log_dirs:
            if directory in unrecovered:
                logger.warning("%s keeps logs not recovered yet: no clean-shutdown marker",
                               directory)
            elif self.health[directory].offline_reason is None:
                write_clean_shutdown(directory, broker_epoch)

    def _online_items(self) -> list[tuple[TopicPartition, Log]]:
        return [(k, log) for k, log in list(self.logs.items()) if log.health.offline_reason is None]

    def _online_logs(self) -> list[Log]:
        return [log for _, log in self._online_items()]


def _read_or_forget(path: Path) -> dict[TopicPartition, int] | None:
    """A checkpoint's entries; None (logged with file and line) when it is corrupt.

    As Kafka: a corrupt recovery-point checkpoint costs a full recovery scan, a corrupt
    log-start-offset checkpoint makes each log start at its first segment. Neither loses data.
    """
    try:
        return OffsetCheckpointFile(path).read()
    except CorruptCheckpointError as error:
        logger.warning("ignoring %s; falling back to what the segments say", error)
        return None
