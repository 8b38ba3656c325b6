"""The queue workload (issue 15): a share group (KIP-932) of Samsa ``ShareConsumer`` members in
explicit acknowledgement mode, fed by an idempotent ``acks=all`` producer of unique values, with
a dead-letter topic (``samsa.share.dead.letter.topic``).

    queue = Queue(bootstrap, history, "queue", rng).start()   # topics, group configs, members
    ...  # faults
    queue.stop()             # producer stopped, members drain what is left (bounded), then stop
    final_queue_read(bootstrap, history, QUEUE_GROUP, QUEUE_TOPIC, DEAD_LETTER_TOPIC)

Topics: ``QUEUE_TOPIC`` and ``DEAD_LETTER_TOPIC``, 3 partitions each, RF 3, min ISR 2; source
partition i's letters go to dead-letter partition i, whose preferred leader is another node
than source partition i's (``DEAD_LETTER_ASSIGNMENT``): dead letters cross nodes, a Produce to
that leader (``broker/share/dead_letters.py``).

What each member does with a record (by its value, so every delivery of one record is treated
alike): a *poison* value (``crc32(value) % 50 == 0``) is REJECTed (half of them) or always
RELEASEd (the other half, until the delivery limit archives it as ``delivery-limit``); any other
value is RELEASEd on its first delivery with probability ``release_fraction`` and else
ACCEPTed. Every poll's acknowledgements are sent with ``commit_sync`` at once.

History (read by ``tests.faults.checker_queue``): ``share-config`` ok (group, topic,
dead_letter_topic) once; the producer's ``send`` ops; per poll with records ``share-poll`` ok
(process, group, topic, records = ``[[partition, offset, delivery_count, value], ...]``); per
partition acknowledged ``share-ack`` invoke then ok (the broker took them: all or none per
partition), fail (INVALID_RECORD_STATE — the member no longer held the records — or never sent
for want of a share session) or info (anything else: a lost connection, a timeout, another
error: a persisted write whose answer was lost may have happened). After the run
``final_queue_read`` writes ``share-offsets`` ok (the group's start offsets) and
``dead-letters`` ok (the dead-letter topic with its ``samsa.dlq.*`` headers).

A member whose ``poll``/``commit_sync`` raises is closed and replaced (process
``"{prefix}-c{i}-{k}"``).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import zlib
from collections import defaultdict
from typing import Any

import confluent_kafka

import samsa
from samsa import AcknowledgeType
from samsa.admin import AdminClient, ConfigResource
from samsa.types import TopicPartition
from tests.faults.history import History
from tests.faults.workload_base import (
    TopicSpec,
    Workload,
    create_topics,
    new_rng,
    rdkafka_config,
    text,
)
from tests.faults.workload_producers import IdempotentProducer

__all__ = ["DEAD_LETTER_TOPIC", "QUEUE_BROKER_CONFIG", "QUEUE_GROUP", "QUEUE_TOPIC", "Queue",
           "final_queue_read", "is_poison"]

log = logging.getLogger("tests.faults.workloads")

QUEUE_TOPIC, DEAD_LETTER_TOPIC, QUEUE_GROUP = "faults-queue", "faults-queue-dlq", "faults-share-group"
DELIVERY_COUNT_LIMIT = 3
# The brokers' share-group defaults for a run: short locks and heartbeats, and a small
# __share_group_state so the nemesis can name the partition holding the group's state.
QUEUE_BROKER_CONFIG = (
    ("group.share.record.lock.duration.ms", "5000"),
    ("group.share.heartbeat.interval.ms", "1000"),
    ("group.share.session.timeout.ms", "10000"),
    ("share.coordinator.state.topic.num.partitions", "4"),
    ("share.coordinator.state.topic.replication.factor", "3"),
    ("share.coordinator.state.topic.min.isr", "2"),
)
ASSIGNMENT = ((1, 2, 3), (2, 3, 1), (3, 1, 2))  # the queue: partition i's preferred leader
# The dead-letter topic's partition i (where source partition i's letters go) is led by another
# node than source partition i, so dead letters cross nodes (a Produce to that leader) and the
# faults hit the sending and the receiving side separately.
DEAD_LETTER_ASSIGNMENT = ((2, 3, 1), (3, 1, 2), (1, 2, 3))
INVALID_RECORD_STATE = 121


def is_poison(value: str) -> bool:
    return zlib.crc32(value.encode()) % 50 == 0


def acknowledge_type(value: str, delivery_count: int, rng: random.Random,
                     release_fraction: float) -> AcknowledgeType:
    if is_poison(value):
        return (AcknowledgeType.REJECT if zlib.crc32(value.encode()) % 100 == 0
                else AcknowledgeType.RELEASE)
    if delivery_count == 1 and rng.random() < release_fraction:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


class ShareMember(Workload):
    """One member of the share group, replaced by a new client when one fails."""

    def __init__(self, bootstrap: str, history: History, process: str, rng: random.Random, *,
                 release_fraction: float = 0.1) -> None:
        super().__init__(history, process)
        self.bootstrap = bootstrap
        self.rng = rng
        self.release_fraction = release_fraction
        self.instances = 0
        self.client_process = process
        self.polled = threading.Event()  # set after the first poll that returned

    def _open(self) -> samsa.ShareConsumer:
        self.client_process = f"{self.process}-{self.instances}"
        self.instances += 1
        return samsa.ShareConsumer(QUEUE_TOPIC, bootstrap_servers=self.bootstrap,
                                   group_id=QUEUE_GROUP, client_id=self.client_process,
                                   share_acknowledgement_mode="explicit", max_poll_records=50,
                                   request_timeout_ms=10_000, fetch_max_wait_ms=500)

    def run(self) -> None:
        consumer = self._open()
        try:
            while not self.stopping:
                try:
                    self._round(consumer)
                except (samsa.KafkaError, OSError, TimeoutError) as error:  # a fault's effect: a new member takes over
                    log.info("%s: %r, replaced", self.client_process, error)
                    self._close(consumer)
                    consumer = self._open()
        finally:
            self._close(consumer)

    def _round(self, consumer: samsa.ShareConsumer) -> None:
        records = consumer.poll(0.5)
        self.polled.set()
        if not records:
            return
        self.history.ok("share-poll", process=self.client_process, group=QUEUE_GROUP,
                        topic=QUEUE_TOPIC, records=[[r.partition, r.offset, r.delivery_count,
                                                     text(r.value)] for r in records])
        acks: dict[int, list[list[Any]]] = defaultdict(list)
        for record in records:
            value = text(record.value) or ""
            kind = acknowledge_type(value, record.delivery_count, self.rng, self.release_fraction)
            consumer.acknowledge(record, kind)
            acks[record.partition].append([record.offset, kind.name, value])
        fields = {partition: {"process": self.client_process, "group": QUEUE_GROUP,
                              "topic": QUEUE_TOPIC, "partition": partition, "acks": found}
                  for partition, found in sorted(acks.items())}
        for one in fields.values():
            self.history.invoke("share-ack", **one)
        try:
            result = consumer.commit_sync()
        except samsa.KafkaError as error:
            for one in fields.values():
                self.history.info("share-ack", **one, error=repr(error))
            raise
        for partition, one in fields.items():
            tp = TopicPartition(QUEUE_TOPIC, partition)
            answer: Any = result.get(tp, "no answer")  # an error, None (taken) or no answer
            if answer is None:
                self.history.ok("share-ack", **one)
            elif _definitely_not_applied(answer):
                self.history.fail("share-ack", **one, error=repr(answer))
            else:
                self.history.info("share-ack", **one, error=repr(answer))

    def _close(self, consumer: samsa.ShareConsumer) -> None:
        with contextlib.suppress(Exception):  # a closing client on a faulty cluster: best effort
            consumer.close()


def _definitely_not_applied(error: Any) -> bool:
    if getattr(error, "code", None) == INVALID_RECORD_STATE:
        return True  # checked before anything is written: the member no longer held them
    return "no share session to carry" in str(error)  # never sent


class Queue(Workload):
    """The topics, the group's configs, ``members`` share members and, once every
    share-partition has a start offset, the producer. ``stop()`` stops the producer, lets the
    members drain for up to ``drain_s`` and stops them."""

    def __init__(self, bootstrap: str, history: History, process: str,
                 seed: random.Random | int | None = None, *, members: int = 3,
                 rate_per_second: float = 30, drain_s: float = 60.0,
                 message_timeout_ms: int = 120_000) -> None:
        super().__init__(history, process)
        self.bootstrap = bootstrap
        self.rng = new_rng(seed)
        self.drain_s = drain_s
        self.members = [ShareMember(bootstrap, history, f"{process}-c{i}",
                                    random.Random(self.rng.getrandbits(64)))
                        for i in range(members)]
        self.producer = IdempotentProducer(bootstrap, history, f"{process}-producer", QUEUE_TOPIC,
                                           random.Random(self.rng.getrandbits(64)),
                                           rate_per_second=rate_per_second,
                                           message_timeout_ms=message_timeout_ms)
        self.drained = False
        self.producing = threading.Event()
        self.setup()

    def setup(self) -> None:
        """Topics and the group's configs, before any member starts (a share-partition takes
        its group's configs when it is loaded)."""
        configs = {"min.insync.replicas": "2"}
        create_topics(self.bootstrap, [
            TopicSpec(QUEUE_TOPIC, 3, 3, configs, replica_assignment=ASSIGNMENT),
            TopicSpec(DEAD_LETTER_TOPIC, 3, 3, configs, replica_assignment=DEAD_LETTER_ASSIGNMENT)])
        with AdminClient(bootstrap_servers=self.bootstrap) as admin:
            admin.alter_configs(ConfigResource("group", QUEUE_GROUP), {
                "share.auto.offset.reset": "earliest",
                "share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
                "samsa.share.dead.letter.topic": DEAD_LETTER_TOPIC})
        self.history.ok("share-config", process=self.process, group=QUEUE_GROUP,
                        topic=QUEUE_TOPIC, dead_letter_topic=DEAD_LETTER_TOPIC)

    def start(self) -> Queue:
        for member in self.members:
            member.start()
        super().start()
        return self

    def run(self) -> None:
        """Start the producer once every share-partition has a start offset (so none starts at
        the end of records already written), then wait."""
        deadline = time.monotonic() + 60
        with AdminClient(bootstrap_servers=self.bootstrap) as admin:
            while not self.stopping and time.monotonic() < deadline:
                with contextlib.suppress(samsa.KafkaError):
                    if len(admin.describe_share_group_offsets(QUEUE_GROUP)) >= 3:
                        break
                self._stopping.wait(0.5)  # the group's state is not pushed: ask again
        if not self.stopping:
            self.producer.start()
            self.producing.set()

    def stop(self, timeout: float = 240.0) -> None:
        super().stop(timeout)
        failures: list[BaseException] = []
        try:
            self.producer.stop(timeout)
        except (RuntimeError, TimeoutError) as error:
            failures.append(error)
        self.drained = self._drain()
        for member in self.members:
            try:
                member.stop(timeout)
            except (RuntimeError, TimeoutError) as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def _drain(self) -> bool:
        """Wait (``drain_s`` at most) until every share-partition's start offset reached its
        high watermark (nothing left to deliver)."""
        deadline = time.monotonic() + self.drain_s
        reader = confluent_kafka.Consumer(rdkafka_config(self.bootstrap, **{
            "group.id": f"{self.process}-drain", "enable.auto.commit": False}))
        try:
            with AdminClient(bootstrap_servers=self.bootstrap) as admin:
                while time.monotonic() < deadline:
                    with contextlib.suppress(samsa.KafkaError, confluent_kafka.KafkaException):
                        offsets = admin.describe_share_group_offsets(QUEUE_GROUP)
                        if len(offsets) >= 3 and all(
                                o.start_offset >= reader.get_watermark_offsets(
                                    confluent_kafka.TopicPartition(tp.topic, tp.partition),
                                    timeout=5)[1]
                                for tp, o in offsets.items()):
                            return True
                    time.sleep(1.0)  # the group's state is not pushed: ask again
        finally:
            reader.close()
        return False


def final_queue_read(bootstrap: str, history: History, *, deadline_s: float = 60.0) -> None:
    """The group's start offsets (``share-offsets``) and the whole dead-letter topic with its
    headers (``dead-letters``)."""
    deadline = time.monotonic() + deadline_s
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        while True:
            try:
                offsets = admin.describe_share_group_offsets(QUEUE_GROUP)
                break
            except samsa.KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # a coordinator still loading: ask again
    history.ok("share-offsets", process="final", group=QUEUE_GROUP,
               offsets=[[tp.topic, tp.partition, o.start_offset, o.lag]
                        for tp, o in sorted(offsets.items())])
    history.ok("dead-letters", process="final", topic=DEAD_LETTER_TOPIC,
               records=_read_dead_letters(bootstrap, deadline))


def _read_dead_letters(bootstrap: str, deadline: float) -> list[list[Any]]:
    from tests.faults.workload_consumers import _bounds

    consumer = confluent_kafka.Consumer(rdkafka_config(bootstrap, **{
        "group.id": "final-dead-letters", "enable.auto.commit": False,
        "enable.partition.eof": True}))
    found: list[list[Any]] = []
    try:
        bounds = _bounds(consumer, [DEAD_LETTER_TOPIC], deadline)
        wanted = {key: end for key, (start, end) in bounds.items() if end > start}
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, start)
                         for (topic, partition), (start, end) in bounds.items() if end > start])
        positions = dict.fromkeys(wanted, -1)
        while any(positions[key] + 1 < end for key, end in wanted.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the dead-letter topic not read to its end: {positions}")
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            key = (str(message.topic()), int(message.partition() or 0))
            offset = int(message.offset() or 0)
            positions[key] = offset
            if offset >= wanted[key]:
                continue
            headers: dict[str, str | None] = {
                str(pair[0]): text(pair[1]) for pair in (message.headers() or [])}
            found.append([key[1], offset, text(message.value()),
                          headers.get("samsa.dlq.topic"),
                          int(headers.get("samsa.dlq.partition") or -1),
                          int(headers.get("samsa.dlq.offset") or -1),
                          headers.get("samsa.dlq.reason"),
                          int(headers.get("samsa.dlq.delivery.count") or 0)])
    finally:
        consumer.close()
    return found
