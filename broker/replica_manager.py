"""The partitions this broker hosts, kept in step with the metadata image.

Start-up: the log manager loads every log; the metadata image is loaded (the newest snapshot,
then the metadata log after it: ``replication.metadata.log``); each
partition of the image gets its ``Partition`` (creating its log if missing) and its topic's
config; a log whose topic is not in the image (a deletion cut short by a crash) is deleted.

Topic ids on disk (``partition.metadata``, written when a log is created): at start-up a log
without one (a directory from before Samsa wrote them) gets its topic's id from the image; a log
whose file names another id than the image's for its topic name belonged to an earlier topic of
that name (deleted and re-created while the directory was elsewhere). As Kafka's KRaft broker
treats such stray logs, it is not served: it is renamed ``<topic>-<partition>.<id>-stray`` and
kept, and the partition gets a new, empty log. A malformed file stops that one partition
(KAFKA_STORAGE_ERROR) until it is fixed or removed.

Config changes (``alter_configs``) are ConfigRecords appended the same way and applied to the live
logs at once; a BROKER record changes the topic defaults (``resolve_default_config``, set by the
broker) and so every log. Topic operations go through the single-node controller (``replication.metadata.controller``):
plan the records, append them to the metadata log (fsynced), then create or delete the logs.
Everything here runs on the broker's event loop; creating a topic's logs and the metadata fsync
are short synchronous disk work, done inline so that an operation is atomic for the handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from uuid import UUID

from protocol.errors import KafkaStorageError
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.producer_ids_record import ProducerIdsRecord
from replication.metadata.controller import (
    TopicPlan,
    plan_create_partitions,
    plan_create_topic,
    plan_delete_topic,
    topic_config,
)
from replication.metadata.image import TOPIC_RESOURCE_TYPE, MetadataImage, TopicImage
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
from storage.log_manager import LogManager
from storage.partition_metadata import METADATA_TOPIC_ID, topic_id_to_string

__all__ = ["METADATA_LOG_CONFIG", "ReplicaManager"]

logger = logging.getLogger("samsa.broker.replica_manager")

# The metadata log is never trimmed by retention.ms/.bytes: its snapshots bound it
# (metadata.max.retention.*, replication.metadata.log); these are its default segments.
METADATA_LOG_CONFIG = MetadataLogConfig().log_config()
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        *,
        node_id: int,
        clock: Clock,
        default_num_partitions: int,
        default_replication_factor: int,
        metadata_log_config: MetadataLogConfig | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.metadata_log_config = metadata_log_config or MetadataLogConfig()
        self.node_id = node_id
        self.clock = clock
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.partitions: dict[tuple[str, int], Partition] = {}
        # replication-offset-checkpoint, read by the broker before startup() opens partitions.
        self.high_watermark_checkpoints: Mapping[tuple[str, int], int] = {}
        self.metadata_log: MetadataLog | None = None
        self._next_producer_id = 0
        self._producer_id_limit = 0
        self.on_topics_deleted: list[Callable[[list[TopicImage]], None]] = []
        # The topic defaults with the image's dynamic broker configs applied; None: the static ones.
        self.resolve_default_config: Callable[[MetadataImage], LogConfig] | None = None

    @property
    def default_config(self) -> LogConfig:
        return self.log_manager.default_config

    @property
    def image(self) -> MetadataImage:
        assert self.metadata_log is not None, "startup() first"
        return self.metadata_log.image

    # -- start-up -----------------------------------------------------------------------------

    def startup(self) -> None:
        self.metadata_log = MetadataLog(self._open_metadata_log(), clock=self.clock,
                                        config=self.metadata_log_config)
        image = self.metadata_log.replay()
        self._refresh_default_config()
        for key in list(self.log_manager.logs):
            if key == (METADATA_TOPIC, METADATA_PARTITION):
                continue
            topic = image.topics_by_name.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                logger.warning("deleting stray log %s-%d: not in the metadata image", *key)
                self.log_manager.delete_log(*key)
            else:
                self._check_topic_id(key, topic.topic_id)
        for topic in image.topics_by_name.values():
            self._open_partitions(topic)

    def _check_topic_id(self, key: tuple[str, int], topic_id: UUID) -> None:
        """A loaded log against the image's topic id (see the module docstring)."""
        try:
            stored = self.log_manager.read_topic_id(*key)
        except CorruptPartitionMetadataError as error:
            logger.error("%s; partition %s-%d is not served until the file is fixed or removed",
                         error, *key)
            self.log_manager.take_offline(*key, reason=str(error))
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
            if self.log_manager.read_topic_id(METADATA_TOPIC, METADATA_PARTITION) is None:
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
        self.log_manager.logs[(METADATA_TOPIC, METADATA_PARTITION)] = log
        self.log_manager.write_topic_id(METADATA_TOPIC, METADATA_PARTITION, METADATA_TOPIC_ID)
        return log

    def _open_partitions(self, topic: TopicImage, first_index: int = 0) -> None:
        config = topic_config(self.image, topic.name, self.default_config)
        for index, state in sorted(topic.partitions.items()):
            if index < first_index:
                continue
            log = self.log_manager.get_or_create_log(topic.name, index, config,
                                                     topic_id=topic.topic_id)
            log.config = config
            partition = Partition(
                log, topic_id=topic.topic_id, leader_epoch=state.leader_epoch, node_id=self.node_id,
                high_watermark_checkpoint=self.high_watermark_checkpoints.get((topic.name, index), 0))
            self.partitions[(topic.name, index)] = partition

    # -- lookups ------------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_by_id(self, topic_id: UUID) -> TopicImage | None:
        return self.image.topics_by_id.get(topic_id)

    def topic_by_name(self, name: str) -> TopicImage | None:
        return self.image.topics_by_name.get(name)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {key: partition.high_watermark for key, partition in self.partitions.items()}

    def last_stable_offsets(self) -> dict[tuple[str, int], int]:
        """What the cleaner may clean up to (Kafka cleans below the first unstable offset)."""
        return {key: partition.last_stable_offset for key, partition in list(self.partitions.items())}

    # -- topic operations ---------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        *,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Sequence[tuple[int, Sequence[int]]] = (),
        validate_only: bool = False,
    ) -> TopicPlan:
        """Create a topic (raises the Kafka error of a refusal); ``validate_only`` writes nothing."""
        plan = plan_create_topic(
            self.image, name,
            num_partitions=num_partitions, replication_factor=replication_factor,
            configs=configs or {}, node_id=self.node_id,
            default_num_partitions=self.default_num_partitions,
            default_replication_factor=self.default_replication_factor,
            default_config=self.default_config, assignments=assignments,
        )
        if validate_only:
            return plan
        assert self.metadata_log is not None
        self.metadata_log.append(plan.records)
        self._open_partitions(self.image.topics_by_id[plan.topic_id])
        logger.info("created topic %s (%s) with %d partition(s)", name, plan.topic_id,
                    plan.num_partitions)
        return plan

    def delete_topic(self, *, name: str | None = None, topic_id: UUID | None = None) -> TopicImage:
        topic, records = plan_delete_topic(self.image, name=name, topic_id=topic_id)
        assert self.metadata_log is not None
        self.metadata_log.append(records)
        for index in topic.partitions:
            self.partitions.pop((topic.name, index), None)
            self.log_manager.delete_log(topic.name, index)
        for callback in self.on_topics_deleted:
            callback([topic])
        logger.info("deleted topic %s (%s)", topic.name, topic.topic_id)
        return topic

    def create_partitions(
        self,
        name: str,
        count: int,
        *,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow a topic to ``count`` partitions (raises the Kafka error of a refusal)."""
        topic, records = plan_create_partitions(
            self.image, name, count, assignments=assignments, node_id=self.node_id
        )
        if validate_only:
            return
        first_new = len(topic.partitions)
        assert self.metadata_log is not None
        self.metadata_log.append(records)
        self._open_partitions(self.image.topics_by_name[name], first_index=first_new)
        logger.info("topic %s now has %d partition(s)", name, count)

    # -- configs ------------------------------------------------------------------------------

    def alter_configs(self, records: Sequence[ConfigRecord]) -> None:
        """Append ConfigRecords (fsynced), then give the affected logs their new config."""
        if not records:
            return
        assert self.metadata_log is not None
        self.metadata_log.append(records)
        if all(record.resource_type == TOPIC_RESOURCE_TYPE for record in records):
            topics = {record.resource_name for record in records}
        else:
            self._refresh_default_config()
            topics = set(self.image.topics_by_name)
        for name in sorted(topics):
            self._apply_topic_config(name)

    def _refresh_default_config(self) -> None:
        if self.resolve_default_config is not None:
            self.log_manager.default_config = self.resolve_default_config(self.image)

    def _apply_topic_config(self, name: str) -> None:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return
        config = topic_config(self.image, name, self.default_config)
        for index in topic.partitions:
            partition = self.partitions.get((name, index))
            if partition is not None:
                partition.log.config = config

    # -- producer ids -------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A new producer id; ids come in blocks recorded in the metadata log (ProducerIdsRecord)."""
        if self._next_producer_id >= self._producer_id_limit:
            assert self.metadata_log is not None
            start = self.image.next_producer_id
            limit = start + PRODUCER_ID_BLOCK_SIZE
            self.metadata_log.append(
                [ProducerIdsRecord(broker_id=self.node_id, broker_epoch=-1, next_producer_id=limit)]
            )
            self._next_producer_id, self._producer_id_limit = start, limit
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
