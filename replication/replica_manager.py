"""The partitions this broker hosts, kept in step with the metadata image.

Start-up: the log manager loads every log; the metadata image is loaded (the newest snapshot,
then the metadata log after it: ``replication.metadata.log``); a log whose topic is not in the
image (a deletion cut short by a crash) is deleted; then the whole image is applied as a delta
(below): each partition this node replicates gets its ``Partition`` (creating its log if
missing) and its topic's config.

Topic ids on disk (``partition.metadata``, written when a log is created): at start-up a log
without one (a directory from before Samsa wrote them) gets its topic's id from the image; a log
whose file names another id than the image's for its topic name belonged to an earlier topic of
that name (deleted and re-created while the directory was elsewhere). As Kafka's KRaft broker
treats such stray logs, it is not served: it is renamed ``<topic>-<partition>.<id>-stray`` and
kept, and the partition gets a new, empty log. So does a log whose file is malformed (a damaged
disk): which topic it belonged to is unknown, so it is set aside too (the ERROR names the file)
and the replica refetches from the leader; Kafka would take the whole log directory offline. The
check runs for every loaded log when the image first names its partition (and at start-up
outside a quorum); the metadata log's own file holds a fixed id and is simply rewritten.

Driven by the metadata image (Kafka's ``ReplicaManager.applyDelta``): the manager listens to the
metadata log, and each committed batch's delta (``replication.metadata.delta``) is applied to the
live partitions: a removed topic's partitions (or one this node no longer replicates) stop and
their logs are deleted; a partition this node leads gets (or keeps) its ``Partition`` and takes
the image's leader epoch, replicas and ISR (``make_leader``); one led by another node does the
same as a follower (``make_follower``: recorded only; fetching from the leader comes with the
follower fetchers). The ``on_local_changes`` callbacks then hear what the delta changed here
(the broker's coordinators take or give up their internal partitions). A ConfigRecord gives the affected logs their new config; a BROKER record
changes the topic defaults (``resolve_default_config``, set by the broker) and so every log.

Unclean restarts (Samsa's guard, on the broker side; Kafka's controller handles it when such
a broker re-registers: KIP-966's clean shutdown detection, KAFKA-15586, and the partition
changes of KAFKA-18106): after a crash the image still names the previous process as leader until the
controller fences it (the session expires; the new registration is refused until then), and
this process's log may be shorter than what that leader acknowledged (a power loss, a damaged
segment cut at start-up). Leading now would make the followers truncate acknowledged records to
match it. So in a quorum, after an unclean shutdown of any log directory, leaderships are held
back (``_defer_leaders``: the partition is not served here) until the broker is registered and
unfenced (``allow_leadership``), by which time the controller has moved them to an in-sync
replica or, if none, kept this one.

Nothing here writes metadata: every write is a proposal to the controller
(``replication.controller``), whose commit reaches this class as a delta. Everything runs on the
broker's event loop.

Cost (issue 18): applying a delta costs O(what it changes), never O(partitions hosted): each
topic's config is resolved once per delta, a new log's directory is chosen in O(log.dirs). The
disk work is done inline while ``disk_work`` is None (start-up, tests, the simulator), so a
committed operation is then in effect before the proposal resolves. Once the broker serves
(``use_executor``) it goes to the storage executor (``replication.disk_work``): a partition whose
log is being created is in ``creating``, not ``partitions``, and answers as Kafka's
``getPartitionOrError`` does for a partition in the image with no local replica yet
(``partition_or_error``: NOT_LEADER_OR_FOLLOWER, retriable); once created, it takes its role from
the image as it is *then*. A deleted partition leaves ``partitions`` at once; its log is closed
and renamed ``-delete`` on the worker, then removed. ``settled(topics)`` tells the admin handlers
when the disk work of their topics is done, so CreateTopics / DeleteTopics answer after it.

Logs loaded in the background (issue 18; ``LogManager.unloaded``, ``samsa.log.background.load.
above``): a partition whose log was found at start-up but not loaded goes the way of a new one
(``creating``, answering NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE), its disk work being the
load (``LogManager.load_unloaded``: recovery if needed, the topic-id check). Loads run one chunk
at a time (``_pump_loads``), so the metadata writes, flushes and checkpoints queued on the same
worker wait for one chunk, not for every log (a chunk of logs to recover runs on the log
manager's recovery threads, ``load_unloaded_many``). The logs a client asks for (``hurry``:
``partition_or_error`` from Produce, Fetch and ListOffsets, a Metadata request naming the
topic) form the next chunk, ahead of the queue. Loads start once the broker serves
(``use_executor``) and stop at a clean stop (``drain``: the logs not loaded then keep their
checkpointed offsets and their directory's unclean state, see ``storage.log_manager``). A log
that loads while this node's leaderships are held back (an unclean restart) is added, not
served, until ``allow_leadership``. Its checkpointed high watermark waits in
``high_watermark_checkpoints`` (and in every checkpoint written meanwhile) until it is hosted.
Found logs the image does not place here are stray: deleted on a single node (as before),
set aside (renamed ``-stray``) in a quorum once caught up, as Kafka's KRaft broker does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from protocol.errors import (
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from replication.disk_work import DiskWork
from replication.metadata.controller import topic_config
from replication.metadata.delta import (
    LocalReplicaChanges,
    MetadataDelta,
    ReplicaState,
    local_changes,
)
from replication.metadata.image import MetadataImage, PartitionImage, TopicImage
from replication.metadata.log import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    MetadataLog,
    MetadataLogConfig,
)
from replication.partition import Partition
from storage.clock import Clock
from storage.config import LogConfig
from storage.errors import CorruptPartitionMetadataError
from storage.log import Log
from storage.log_manager import LogManager, UnloadedLog
from storage.partition_metadata import METADATA_TOPIC_ID, topic_id_to_string

__all__ = ["ReplicaManager"]

logger = logging.getLogger("samsa.replication.replica_manager")

# New logs per disk job: each job's completion registers this many partitions on the loop (well
# under a millisecond), and the first partitions of a large topic are served before the last
# are created.
CREATE_CHUNK = 100


@dataclass(slots=True)
class PendingLog:
    """A log being created (or, with ``found``, loaded) on the storage worker. ``log`` is set
    by the worker; ``cancelled`` by the loop when the partition is deleted first (the deletion
    job then removes ``log``, or ``found``'s directory if it was never loaded)."""

    topic: str
    partition: int
    topic_id: UUID
    directory: Path
    config: LogConfig
    log: Log | None = None
    cancelled: bool = False
    found: UnloadedLog | None = None
    submitted: bool = False  # a load handed to the worker (a chunk skips it then)
    hurried: bool = False  # in the queue of loads a client asked for (``hurry``)


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        *,
        node_id: int,
        clock: Clock,
        metadata_log_config: MetadataLogConfig | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.metadata_log_config = metadata_log_config or MetadataLogConfig()
        self.node_id = node_id
        self.clock = clock
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Partitions whose log is being created off the loop (see the module docstring).
        self.creating: dict[tuple[str, int], PendingLog] = {}
        self.disk_work: DiskWork | None = None
        # replication-offset-checkpoint, read by the broker before startup() opens partitions;
        # after start-up only the entries of logs still loading (popped as each is hosted).
        self.high_watermark_checkpoints: dict[tuple[str, int], int] = {}
        # Found logs waiting to load, in chunks; one chunk on the worker at a time.
        self._load_queue: deque[list[PendingLog]] = deque()
        # Loads a client asked for (``hurry``): taken before the queue's next chunk.
        self._hurry_queue: deque[PendingLog] = deque()
        self._load_in_flight = False
        self._loads_stopped = False  # a clean stop: no new chunk
        self._loads_started: float | None = None
        self.logs_loaded = 0  # found logs loaded in the background so far
        self._load_waiters: list[asyncio.Future[None]] = []
        self._loading: Counter[str] = Counter()  # found logs in ``creating``, by topic
        self.metadata_log: MetadataLog | None = None
        self.is_caught_up = False  # see caught_up()
        self.on_topics_deleted: list[Callable[[list[TopicImage]], None]] = []
        # Called after each delta with what it changed here (the coordinators' elections).
        self.on_local_changes: list[Callable[[LocalReplicaChanges], None]] = []
        self.on_role_changes: list[Callable[[Partition], None]] = []
        # The topic defaults with the image's dynamic broker configs applied; None: the static ones.
        self.resolve_default_config: Callable[[MetadataImage], LogConfig] | None = None
        # False from an unclean restart in a quorum until this incarnation is unfenced: the
        # leaderships the image names are the previous process's (see "Unclean restarts").
        self.leadership_allowed = True
        self._deferred_leaders: dict[tuple[str, int], ReplicaState] = {}

    def use_executor(self, executor: Executor, loop: asyncio.AbstractEventLoop) -> None:
        """From now on, create and delete logs on ``executor`` (the broker's storage worker);
        the found logs waiting to load start loading."""
        self.disk_work = DiskWork(executor, loop)
        self._pump_loads()

    def settled(self, topics: Iterable[str]) -> Awaitable[None] | None:
        """Resolves once the log creations and deletions of ``topics`` begun so far are done
        (None: none is under way)."""
        return None if self.disk_work is None else self.disk_work.settled(topics)

    def disk_work_pending(self, topic: str) -> bool:
        """Whether logs of ``topic`` are being created, loaded or deleted on the storage
        worker (or wait to load)."""
        return self._loading[topic] > 0 or (
            self.disk_work is not None and self.disk_work.pending_on(topic))

    def loaded(self) -> Awaitable[None] | None:
        """Resolves once no found log waits to load (or at a clean stop); None: none waits."""
        if not self._load_queue and not self._load_in_flight:
            return None
        assert self.disk_work is not None, "loads start with use_executor()"
        waiter = self.disk_work.loop.create_future()
        self._load_waiters.append(waiter)
        return waiter

    def _wake_load_waiters(self) -> None:
        waiters, self._load_waiters = self._load_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        """A clean stop: wait for the disk work under way (no new chunk of loads starts)."""
        self._loads_stopped = True
        self._wake_load_waiters()
        if self.disk_work is not None:
            await self.disk_work.drain()

    @property
    def default_config(self) -> LogConfig:
        return self.log_manager.default_config

    @property
    def image(self) -> MetadataImage:
        assert self.metadata_log is not None, "startup() first"
        return self.metadata_log.image

    # -- start-up -----------------------------------------------------------------------------

    def startup(self, *, quorum: bool = False, hold_leadership: bool = False) -> None:
        """Replay the metadata and open the partitions it names. In a quorum (``quorum``) the
        image at start is only the newest snapshot's (``MetadataLog.replay``): logs it does not
        name are kept, as records committed later may name them (Kafka looks for stray logs
        only once the broker has caught up with the metadata). ``hold_leadership``: this node
        registers with a quorum controller (see "Unclean restarts"), which after an unclean
        shutdown must unfence it before it leads."""
        self.leadership_allowed = not (hold_leadership and self.log_manager.unclean_directories)
        self.metadata_log = MetadataLog(self._open_metadata_log(), clock=self.clock,
                                        config=self.metadata_log_config)
        image = self.metadata_log.replay(commit_recovered=not quorum)
        self.metadata_log.listeners.append(self._apply_once_caught_up)
        if quorum:  # the image is stale until the quorum says how far to read: caught_up()
            return
        self._remove_stray_logs(image)
        self.caught_up()

    def caught_up(self) -> None:
        """Take every role the image names, whole; from now on each committed delta is applied
        as it comes. A single node: at once. A broker in a quorum: once it is registered and the
        controller says its metadata caught up (``broker.quorum``; Kafka's
        ``initialCatchUpFuture``) — before that it takes no role at all: a restarting node that
        replays a stale image could otherwise lead (or follow) a partition in an epoch long
        gone, accept writes in it and tell followers to truncate to it."""
        if self.is_caught_up:
            return
        self.is_caught_up = True
        full = MetadataDelta.full(self.image)
        full.broker_configs_changed = True
        self.apply_delta(full, self.image)
        self._set_aside_stray_found(self.image)

    def _set_aside_stray_found(self, image: MetadataImage) -> None:
        """Found logs (not loaded yet) that the caught-up image does not place on this node:
        renamed ``-stray`` (kept for the operator, never served), as Kafka's KRaft broker
        treats the stray logs it finds once it has caught up."""
        for key in list(self.log_manager.unloaded):
            topic = image.topics_by_name.get(key[0])
            registration = None if topic is None else topic.partitions.get(key[1])
            if registration is not None and self.node_id in registration.replicas:
                continue
            try:
                aside = self.log_manager.set_aside_unloaded(key)
            except OSError as error:
                logger.error("cannot set aside the stray log of %s-%d: %s", *key, error)
                continue
            logger.warning("log of %s-%d is not in the metadata image for this node: not "
                           "served; renamed to %s", *key, aside)

    def _apply_once_caught_up(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self.is_caught_up:
            self.apply_delta(delta, image)

    def _remove_stray_logs(self, image: MetadataImage) -> None:
        for key in list(self.log_manager.unloaded):  # found, not loaded: nothing to check yet
            topic = image.topics_by_name.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                logger.warning("deleting stray log %s-%d: not in the metadata image", *key)
                entry = self.log_manager.forget_unloaded(key)
                assert entry is not None
                self.log_manager.purge_directories(self.log_manager.remove_log_files((), [entry]))
        for key in list(self.log_manager.logs):
            if key == (METADATA_TOPIC, METADATA_PARTITION):
                continue
            topic = image.topics_by_name.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                logger.warning("deleting stray log %s-%d: not in the metadata image", *key)
                self.log_manager.delete_log(*key)
            else:
                self._check_topic_id(key, topic.topic_id)

    def _check_topic_id(self, key: tuple[str, int], topic_id: UUID) -> None:
        """A loaded log against the image's topic id (see the module docstring)."""
        try:
            stored = self.log_manager.read_topic_id(*key)
        except CorruptPartitionMetadataError as error:
            aside = self.log_manager.set_aside_stray(*key)
            logger.error("%s; the log of %s-%d is not served: renamed to %s, a new one is "
                         "created and refetched from the leader", error, *key, aside)
            return
        except KafkaStorageError as error:  # its log directory is offline: nothing to check
            logger.error("cannot read the topic id of %s-%d: %s", *key, error)
            return
        if stored is None:
            logger.info("writing partition.metadata of %s-%d: topic id %s", *key,
                        topic_id_to_string(topic_id))
            self.log_manager.write_topic_id(*key, topic_id)
        elif stored != topic_id:
            directory = self.log_manager.logs[key].directory
            aside = self.log_manager.set_aside_stray(*key)
            logger.warning(
                "log %s has topic id %s but topic %s has topic id %s in the metadata image "
                "(deleted and re-created while this log was elsewhere): not served; "
                "renamed to %s", directory, topic_id_to_string(stored), key[0],
                topic_id_to_string(topic_id), aside,
            )

    def _open_metadata_log(self) -> Log:
        existing = self.log_manager.get_log(METADATA_TOPIC, METADATA_PARTITION)
        if existing is not None:
            existing.config = self.metadata_log_config.log_config()
            try:
                stored = self.log_manager.read_topic_id(METADATA_TOPIC, METADATA_PARTITION)
            except CorruptPartitionMetadataError as error:
                logger.error("%s; rewriting it (the metadata topic's id is fixed)", error)
                stored = None
            if stored != METADATA_TOPIC_ID:
                self.log_manager.write_topic_id(METADATA_TOPIC, METADATA_PARTITION,
                                                METADATA_TOPIC_ID)
            return existing
        # Kafka keeps the metadata log in metadata.log.dir, by default the first of log.dirs.
        first: Path = self.log_manager.log_dirs[0]
        log = Log.open(
            first / f"{METADATA_TOPIC}-{METADATA_PARTITION}",
            self.metadata_log_config.log_config(),
            clock=self.clock,
            had_clean_shutdown=True,
            health=self.log_manager.health[first],
        )
        self.log_manager.add_log(log)
        self.log_manager.write_topic_id(METADATA_TOPIC, METADATA_PARTITION, METADATA_TOPIC_ID)
        return log

    # -- image deltas (Kafka's ReplicaManager.applyDelta) -------------------------------------

    def apply_delta(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Bring the live partitions in line with ``image`` after the batch ``delta``."""
        if delta.broker_configs_changed:
            self._refresh_default_config(image)
        changes = local_changes(delta, image, self.node_id)
        if not self.leadership_allowed:
            changes = self._defer_leaders(changes)
        self._stop_partitions(changes.deletes, delta.removed_topics)
        self._apply_roles(changes, image)
        topics = image.topics_by_name if delta.broker_configs_changed else delta.topic_configs_changed
        for name in sorted(topics):
            self._apply_topic_config(image, name)
        for callback in self.on_local_changes:
            callback(changes)

    def _apply_roles(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        configs = _TopicConfigs(image, self.default_config)
        missing: list[ReplicaState] = []
        found = self.log_manager.unloaded
        for state in (*changes.leaders, *changes.followers):
            key = (state.topic, state.partition.partition_id)
            if key in self.creating:
                continue  # takes its role from the image once its log is created
            if key not in self.partitions and (key in found or (
                    self.disk_work is not None and self.log_manager.get_log(*key) is None)):
                missing.append(state)  # created, or loaded, off the loop
                continue
            self._become(state, configs)
        if missing:
            self._create_logs(missing, configs)

    # -- unclean restarts ---------------------------------------------------------------------

    def _defer_leaders(self, changes: LocalReplicaChanges) -> LocalReplicaChanges:
        """Hold back the leaderships of ``changes`` until ``allow_leadership``; a partition
        the image gives to another leader or removes meanwhile is no longer held."""
        for state in changes.leaders:
            self._deferred_leaders[(state.topic, state.partition.partition_id)] = state
        for state in changes.followers:
            self._deferred_leaders.pop((state.topic, state.partition.partition_id), None)
        for key in changes.deletes:
            self._deferred_leaders.pop(key, None)
        if changes.leaders:
            logger.info("not leading %d partitions before this broker is registered and "
                        "unfenced (unclean restart)", len(changes.leaders))
        return LocalReplicaChanges(changes.deletes, (), changes.followers)

    def allow_leadership(self) -> None:
        """This incarnation is unfenced: lead where the image still names this node."""
        if self.leadership_allowed:
            return
        self.leadership_allowed = True
        held, self._deferred_leaders = self._deferred_leaders, {}
        image = self.image
        leaders = []
        for topic_name, index in held:
            topic = image.topics_by_name.get(topic_name)
            current = None if topic is None else topic.partitions.get(index)
            if topic is not None and current is not None and current.leader == self.node_id:
                leaders.append(ReplicaState(topic_name, topic.topic_id, current))
        logger.info("unfenced: leading %d partitions held back since the unclean restart",
                    len(leaders))
        changes = LocalReplicaChanges((), tuple(leaders), ())
        self._apply_roles(changes, image)
        for callback in self.on_local_changes:
            callback(changes)

    def _become(self, state: ReplicaState, configs: _TopicConfigs) -> None:
        """``make_leader`` / ``make_follower`` as the image says; a partition whose log cannot
        be opened (its directory offline) is logged and left out, the others go on."""
        try:
            partition = self._partition_for(state, configs)
        except (KafkaError, OSError) as error:
            logger.error("cannot host %s-%d: %s", state.topic, state.partition.partition_id, error)
            return
        self._take_role(partition, state.partition)

    def _take_role(self, partition: Partition, registration: PartitionImage) -> None:
        """Leader or follower as ``registration`` says; the ``on_role_changes`` callbacks hear
        of it (the follower fetchers, the delayed operations of a partition that moved)."""
        arguments = dict(leader_id=registration.leader, leader_epoch=registration.leader_epoch,
                         replicas=registration.replicas, isr=registration.isr,
                         partition_epoch=registration.partition_epoch,
                         now_ms=self.clock.milliseconds())
        if registration.leader == self.node_id:
            partition.make_leader(**arguments)  # type: ignore[arg-type]
        else:
            partition.make_follower(**arguments)  # type: ignore[arg-type]
        for callback in self.on_role_changes:
            callback(partition)

    def _partition_for(self, state: ReplicaState, configs: _TopicConfigs) -> Partition:
        """The live partition of ``state``, created with its log (inline) if this node lacks it."""
        key = (state.topic, state.partition.partition_id)
        partition = self.partitions.get(key)
        if partition is None:
            config = configs.of(state.topic)
            if key in self.log_manager.logs:  # loaded from disk: stray or unreadable goes aside
                self._check_topic_id(key, state.topic_id)
            log = self.log_manager.get_or_create_log(*key, config, topic_id=state.topic_id)
            log.config = config
            partition = self._host(log, state.topic_id, state.partition.leader_epoch)
        return partition

    def _host(self, log: Log, topic_id: UUID, leader_epoch: int) -> Partition:
        key = (log.topic, log.partition)
        partition = Partition(
            log, topic_id=topic_id, leader_epoch=leader_epoch, node_id=self.node_id,
            high_watermark_checkpoint=self.high_watermark_checkpoints.pop(key, 0),
            role_pending=True)
        self.partitions[key] = partition
        return partition

    # -- log creation and deletion off the loop -----------------------------------------------

    def _create_logs(self, states: Sequence[ReplicaState], configs: _TopicConfigs) -> None:
        """Choose each new log's directory now (on the loop), create the files on the worker
        in chunks of ``CREATE_CHUNK``; ``_logs_created`` hosts them. A log found at start-up is
        loaded instead, in the queue of loads (``_pump_loads``)."""
        found = self.log_manager.unloaded
        loads = [PendingLog(state.topic, state.partition.partition_id, state.topic_id,
                            entry.log_dir, configs.of(state.topic), found=entry)
                 for state in states
                 if (entry := found.get((state.topic, state.partition.partition_id))) is not None]
        for pending in loads:
            self.creating[(pending.topic, pending.partition)] = pending
            self._loading[pending.topic] += 1
        for start in range(0, len(loads), CREATE_CHUNK):
            self._load_queue.append(loads[start:start + CREATE_CHUNK])
        if loads:
            self._pump_loads()
        states = [state for state in states if (state.topic, state.partition.partition_id)
                  not in self.creating]
        if not states:
            return
        assert self.disk_work is not None
        for start in range(0, len(states), CREATE_CHUNK):
            chunk = []
            for state in states[start:start + CREATE_CHUNK]:
                try:
                    directory = self.log_manager.choose_directory()
                except KafkaStorageError as error:
                    logger.error("cannot host %s-%d: %s", state.topic,
                                 state.partition.partition_id, error)
                    continue
                pending = PendingLog(state.topic, state.partition.partition_id, state.topic_id,
                                     directory, configs.of(state.topic))
                self.creating[(pending.topic, pending.partition)] = pending
                chunk.append(pending)
            self.disk_work.submit(
                [(p.topic, p.partition) for p in chunk],
                lambda chunk=chunk: self._open_logs(chunk),  # type: ignore[misc]
                lambda outcome, chunk=chunk: self._logs_created(chunk, outcome))  # type: ignore[misc]

    def _pump_loads(self) -> None:
        """Hand the next chunk of found logs to the worker, unless one is there, the broker
        does not serve yet or is stopping."""
        if self.disk_work is None or self._load_in_flight or self._loads_stopped:
            return
        chunk: list[PendingLog] = []
        while self._hurry_queue and len(chunk) < CREATE_CHUNK:
            pending = self._hurry_queue.popleft()
            if not pending.cancelled and not pending.submitted:
                chunk.append(pending)
        while self._load_queue and not chunk:
            chunk = [pending for pending in self._load_queue.popleft()
                     if not pending.cancelled and not pending.submitted]
        for pending in chunk:
            pending.submitted = True
        if not chunk:
            if self._loads_started is not None:
                logger.info("loaded %d logs in the background in %.1f s", self.logs_loaded,
                            time.monotonic() - self._loads_started)
                self._loads_started = None
            self._wake_load_waiters()
            return
        if self._loads_started is None:
            self._loads_started = time.monotonic()
        self._load_in_flight = True
        self.disk_work.submit(
            [(pending.topic, pending.partition) for pending in chunk],
            lambda: self._open_logs(chunk),
            lambda outcome: self._logs_loaded(chunk, outcome))

    def _logs_loaded(self, chunk: Sequence[PendingLog],
                     outcome: dict[tuple[str, int], Exception] | BaseException) -> None:
        self._load_in_flight = False
        self.logs_loaded += sum(1 for pending in chunk if pending.log is not None)
        try:
            self._logs_created(chunk, outcome)
        finally:
            self._pump_loads()

    def _loaded_one(self, topic: str) -> None:
        self._loading[topic] -= 1
        if not self._loading[topic]:
            del self._loading[topic]

    def _open_logs(self, chunk: Sequence[PendingLog]) -> dict[tuple[str, int], Exception]:
        """On the worker: each log's files (or, found at start-up, its load); the errors by
        partition (the rest succeeded)."""
        errors: dict[tuple[str, int], Exception] = {}
        found = [pending for pending in chunk if pending.found is not None]
        loaded = self.log_manager.load_unloaded_many(
            [(pending.found, pending.config, pending.topic_id)  # type: ignore[misc]
             for pending in found])
        for pending, outcome in zip(found, loaded, strict=True):
            if isinstance(outcome, Log):
                pending.log = outcome
            else:
                errors[(pending.topic, pending.partition)] = outcome
        for pending in chunk:
            if pending.found is not None:
                continue
            try:
                pending.log = self.log_manager.open_new_log(
                    pending.directory, pending.topic, pending.partition, pending.config,
                    topic_id=pending.topic_id)
            except (KafkaError, OSError) as error:
                errors[(pending.topic, pending.partition)] = error
        return errors

    def _logs_created(self, chunk: Sequence[PendingLog],
                      outcome: dict[tuple[str, int], Exception] | BaseException) -> None:
        """On the loop: host each created log still wanted, in its role in the current image."""
        for pending in chunk:
            key = (pending.topic, pending.partition)
            if pending.cancelled or self.creating.get(key) is not pending:
                continue  # deleted meanwhile: the deletion job removes its files
            del self.creating[key]
            if pending.found is not None:
                self._loaded_one(pending.topic)
            error = outcome if isinstance(outcome, BaseException) else outcome.get(key)
            if error is not None or pending.log is None:
                if pending.found is None:
                    self.log_manager.release_directory(pending.directory)
                # (a found log stays in ``unloaded``: its offsets checkpointed, tried at restart)
                logger.error("cannot host %s-%d: %s", *key, error)
                continue
            self._host_created(pending, pending.log)

    def _host_created(self, pending: PendingLog, log: Log) -> None:
        self.log_manager.add_log(log, topic_id=pending.topic_id)
        image = self.image
        topic = image.topics_by_id.get(pending.topic_id)
        registration = None if topic is None else topic.partitions.get(pending.partition)
        assert registration is not None, "a partition deleted meanwhile is cancelled"
        log.config = topic_config(image, pending.topic, self.default_config)
        if registration.leader == self.node_id and not self.leadership_allowed:
            key = (pending.topic, pending.partition)  # held back: served by allow_leadership
            self._deferred_leaders[key] = ReplicaState(pending.topic, pending.topic_id,
                                                       registration)
            return
        partition = self._host(log, pending.topic_id, registration.leader_epoch)
        self._take_role(partition, registration)

    def _stop_partitions(self, keys: Sequence[tuple[str, int]], removed: list[TopicImage]) -> None:
        """Kafka's ``stopPartitions`` with deletion: forget them and delete their logs (on the
        worker once there is one); the ``on_topics_deleted`` callbacks then complete the
        delayed fetches waiting on them."""
        logs: list[Log] = []
        cancelled: list[PendingLog] = []
        never_loaded: list[UnloadedLog] = []
        for key in keys:
            self.partitions.pop(key, None)
            self.high_watermark_checkpoints.pop(key, None)
            pending = self.creating.pop(key, None)
            if pending is not None:
                pending.cancelled = True
                if pending.found is None:
                    self.log_manager.release_directory(pending.directory)
                else:
                    self._loaded_one(pending.topic)
                cancelled.append(pending)
            entry = self.log_manager.forget_unloaded(key)
            if entry is not None and pending is None:
                never_loaded.append(entry)
            log = self.log_manager.detach_log(*key)
            if log is not None:
                logs.append(log)
        if logs or cancelled or never_loaded:
            self._delete_logs(keys, logs, cancelled, never_loaded)
        if removed:
            for callback in self.on_topics_deleted:
                callback(removed)

    def _delete_logs(self, keys: Sequence[tuple[str, int]], logs: list[Log],
                     cancelled: list[PendingLog], never_loaded: list[UnloadedLog]) -> None:
        manager = self.log_manager
        if self.disk_work is None:
            manager.purge_directories(manager.remove_log_files(logs, never_loaded))
            return
        disk_work = self.disk_work

        def remove() -> list[Path]:  # on the worker, after the creations of ``cancelled``
            return manager.remove_log_files(
                logs + [pending.log for pending in cancelled if pending.log is not None],
                never_loaded + [pending.found for pending in cancelled
                                if pending.log is None and pending.found is not None])

        def removed(outcome: list[Path] | BaseException) -> None:
            if isinstance(outcome, BaseException):
                logger.error("deleting %d log(s) failed: %s", len(keys), outcome)
                return
            disk_work.submit((), lambda: manager.purge_directories(outcome), lambda _: None)

        disk_work.submit(keys, remove, removed)

    def hurry(self, topic: str, partitions: Iterable[int] | None = None) -> int:
        """A client asked for ``topic`` (its ``partitions``; None: all): its logs still waiting
        to load go to the head of the queue, so a producer or consumer of a few partitions is
        served seconds after the listener opens, not after every log of a large node loaded.
        Returns how many were moved. O(the partitions named)."""
        if partitions is None:
            if not self._loading[topic]:
                return 0
            image_topic = self.image.topics_by_name.get(topic)
            partitions = () if image_topic is None else image_topic.partitions
        moved = 0
        for index in partitions:
            pending = self.creating.get((topic, index))
            if (pending is None or pending.found is None or pending.submitted
                    or pending.cancelled or pending.hurried):
                continue
            pending.hurried = True
            self._hurry_queue.append(pending)  # its place in its chunk is skipped when reached
            moved += 1
        return moved

    # -- lookups ------------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_or_error(self, topic: str, index: int) -> Partition:
        """The hosted partition, or raise as Kafka's ``getPartitionOrError``: a partition the
        image has but this node does not host (its log still being created, or another node's)
        is NOT_LEADER_OR_FOLLOWER; one the image lacks is UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        image_topic = None if self.metadata_log is None else self.image.topics_by_name.get(topic)
        if image_topic is not None and index in image_topic.partitions:
            if self._loading[topic]:
                self.hurry(topic, (index,))
            raise NotLeaderOrFollowerError(
                f"partition {topic}-{index} is not hosted on node {self.node_id} (yet)")
        raise UnknownTopicOrPartitionError()

    def topic_by_id(self, topic_id: UUID) -> TopicImage | None:
        return self.image.topics_by_id.get(topic_id)

    def topic_by_name(self, name: str) -> TopicImage | None:
        return self.image.topics_by_name.get(name)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """Each hosted partition's high watermark, and the checkpointed one of each log still
        loading (so a checkpoint written meanwhile keeps it)."""
        high_watermarks = dict(self.high_watermark_checkpoints)
        high_watermarks.update((key, partition.high_watermark)
                               for key, partition in list(self.partitions.items()))
        return high_watermarks

    def last_stable_offsets(self) -> dict[tuple[str, int], int]:
        """What the cleaner may clean up to (Kafka cleans below the first unstable offset)."""
        return {key: partition.last_stable_offset for key, partition in list(self.partitions.items())}

    # -- configs ------------------------------------------------------------------------------

    def _refresh_default_config(self, image: MetadataImage) -> None:
        if self.resolve_default_config is not None:
            self.log_manager.default_config = self.resolve_default_config(image)

    def _apply_topic_config(self, image: MetadataImage, name: str) -> None:
        """Every hosted partition of ``name`` gets its config (a change of it, or of the
        defaults); partitions still being created read it when they are hosted."""
        topic = image.topics_by_name.get(name)
        if topic is None:
            return
        config = topic_config(image, name, self.default_config)
        for index in topic.partitions:
            partition = self.partitions.get((name, index))
            if partition is not None:
                partition.log.config = config


class _TopicConfigs:
    """Each topic's effective config, resolved once per delta (not once per partition)."""

    def __init__(self, image: MetadataImage, default_config: LogConfig) -> None:
        self.image = image
        self.default_config = default_config
        self._resolved: dict[str, LogConfig] = {}

    def of(self, topic: str) -> LogConfig:
        config = self._resolved.get(topic)
        if config is None:
            config = self._resolved[topic] = topic_config(self.image, topic, self.default_config)
        return config
