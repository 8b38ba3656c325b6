"""A consumer-group member that counts a record as consumed only once its offset is committed.

``ExactlyOnceMember`` processes each record by committing ``offset + 1`` synchronously
(``commit(message, asynchronous=False)``) and reports ``(partition, offset)`` only after the
commit succeeded. A failed commit (a rebalance, a fenced generation) is not a consumption: the
member seeks the partition back to the record, and the record is consumed again, by this member
if it keeps the partition or by the next owner, which starts from the committed offset. So
across any membership change the union of what every member reported is each record exactly
once, which the tests assert.

Two rules of librdkafka's make that hold, and are why it is written this way:

- One message per ``poll()``. A batch ``consume()`` can return messages fetched before a
  revocation it served in the same call; committing those later (with the member's new
  generation, which the broker accepts, as Kafka's does) would commit a partition that another
  member already reads. A single message always precedes any rebalance event still queued.
- One consumer per thread (``start``), as librdkafka wants. A synchronous commit waits behind
  the member's own JoinGroup on the coordinator connection (requests of a connection are
  answered in order, by Kafka too); if the same thread also had to poll another member for the
  rebalance to complete, neither would ever return.
- A record below the group's committed offset of a partition just (re)assigned is stale and
  skipped: librdkafka 2.16 can deliver, after a partition comes back to a member, a record it
  fetched for that partition under an earlier assignment (seen here: the record at offset 0
  after the broker had answered OffsetFetch with 111); committing it would move the committed
  offset back and count a record another member already counted. The floor is what the broker
  answers (``committed()``), so a wrong answer still shows as a gap or a duplicate.

Run as a process (``python -m tests.integration.group_member BOOTSTRAP GROUP TOPIC STRATEGY
SESSION_MS PATH``), it appends one "partition offset" line per consumed record to PATH (flushed
after each), prints "assigned P,P,..." to stdout when its assignment changes, and on a line on
stdin stops consuming, prints "paused" and blocks without polling (librdkafka keeps
heartbeating), so a test can SIGKILL it with no record half-processed.
"""

from __future__ import annotations

import contextlib
import select
import sys
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

QUIET = {"log_level": 3}
LEAVE_TIMEOUT_SECONDS = 30.0


def member_config(bootstrap: str, group: str, strategy: str, session_timeout_ms: int) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
        "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 100, **QUIET,
    }


class ExactlyOnceMember:
    def __init__(self, config: dict[str, object], topic: str, on_consumed: Callable[[int, int], None],
                 *, on_progress: Callable[[], None] = lambda: None) -> None:
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])
        self.on_consumed = on_consumed
        self.on_progress = on_progress  # after each record and assignment change (thread: this one)
        self.assigned: frozenset[int] = frozenset()
        self.failed_commits = 0
        self.stale_records = 0
        self._floor: dict[int, int] = {}  # partition -> lowest offset still to consume
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- in its own thread -------------------------------------------------------------------

    def start(self) -> ExactlyOnceMember:
        self._thread = threading.Thread(target=self._run, name=f"member-{id(self)}", daemon=True)
        self._thread.start()
        return self

    def leave(self) -> None:
        """Stop consuming, leave the group and close (in the member's thread); wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LEAVE_TIMEOUT_SECONDS + 5)
            assert not self._thread.is_alive(), "the member did not leave"
        else:
            self._leave()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll_once()
        except BaseException as error:  # reported by leave()
            self.error = error
        finally:
            self._leave()
            self.on_progress()

    def _leave(self) -> None:
        """Unsubscribe (a LeaveGroup), serve the revocation, then close: librdkafka can hang in
        ``close()`` when an assignment reaches it while closing (librdkafka #4527, #4041)."""
        self.consumer.unsubscribe()
        deadline = time.monotonic() + LEAVE_TIMEOUT_SECONDS
        while self.consumer.assignment() and time.monotonic() < deadline:
            self.consumer.poll(0.05)  # records returned now are not processed: not consumed
        self.consumer.close()

    # ---- one step ------------------------------------------------------------------------------

    def poll_once(self, timeout_seconds: float = 0.05) -> None:
        message = self.consumer.poll(timeout_seconds)
        self._track_assignment()  # before the message: poll may have served a rebalance first
        if message is not None:
            self.process(message)

    def _track_assignment(self) -> None:
        partitions = self.consumer.assignment()
        assigned = frozenset(tp.partition for tp in partitions)
        if assigned == self.assigned:
            return
        added = [tp for tp in partitions if tp.partition not in self.assigned]
        self._floor = {p: floor for p, floor in self._floor.items() if p in assigned}
        if added:
            for committed in self.consumer.committed(added, timeout=LEAVE_TIMEOUT_SECONDS):
                self._floor[committed.partition] = max(committed.offset, 0)
        self.assigned = assigned
        self.on_progress()

    def process(self, message: Message) -> None:
        if message.error():
            raise KafkaException(message.error())
        partition, offset = message.partition(), message.offset()
        if offset < self._floor.get(partition, 0):
            self.stale_records += 1  # fetched under an earlier assignment (see the docstring)
            return
        if self._commit(message):
            self._floor[partition] = offset + 1
            self.on_consumed(partition, offset)
            self.on_progress()
        else:
            self.failed_commits += 1
            # Read it again; when no longer assigned, its next owner starts from the commit.
            with contextlib.suppress(KafkaException):
                self.consumer.seek(TopicPartition(message.topic(), message.partition(), message.offset()))

    def _commit(self, message: Message) -> bool:
        try:
            results = self.consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            return False
        return all(result.error is None for result in results or ())


def main(bootstrap: str, group: str, topic: str, strategy: str, session_ms: str, path: str) -> None:
    with open(path, "a", encoding="ascii") as out:
        def consumed(partition: int, offset: int) -> None:
            out.write(f"{partition} {offset}\n")
            out.flush()

        member = ExactlyOnceMember(member_config(bootstrap, group, strategy, int(session_ms)),
                                   topic, consumed)
        announced: frozenset[int] | None = None
        while not select.select([sys.stdin], [], [], 0)[0]:
            member.poll_once()
            if member.assigned != announced:
                announced = member.assigned
                print("assigned " + ",".join(map(str, sorted(announced))), flush=True)
        sys.stdin.readline()  # the request to pause
        print("paused", flush=True)
        sys.stdin.readline()  # blocks until the test kills this process (closing would leave)


if __name__ == "__main__":
    main(*sys.argv[1:])
