"""DeleteRecords waiting for the replicas (Kafka's ``DelayedDeleteRecords``), sans-IO.

The leader raises its log start offset at once (``Partition.delete_records``); each follower
takes the new log start from its next Fetch answer and reports its own in the Fetch after. A
``DelayedDeleteRecords`` completes when every partition's low watermark (the smallest log start
offset over the replicas the leader knows: ``Partition.low_watermark``) reached the offset asked,
or when the partition's leadership moved (NOT_LEADER_OR_FOLLOWER), or at the request's
``timeout_ms`` (REQUEST_TIMED_OUT for what is still short). Watched in the broker's produce
purgatory under its partitions, so every follower Fetch that moved a follower's log start
re-checks it.

Owned by the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import KafkaError, NotLeaderOrFollowerError, RequestTimedOutError
from replication.partition import Partition
from replication.purgatory import DelayedOperation

__all__ = ["DelayedDeleteRecords"]

TopicPartition = tuple[str, int]
# per partition: its low watermark, or the error to answer
Outcomes = dict[TopicPartition, int | KafkaError]


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, timeout_ms: int, required: dict[TopicPartition, int],
                 partition: Callable[[str, int], Partition | None],
                 done: Callable[[Outcomes], None]) -> None:
        super().__init__(timeout_ms)
        self.required = dict(required)
        self.outcomes: Outcomes = {}
        self._partition = partition
        self._done: Callable[[Outcomes], None] | None = done

    def try_complete(self) -> bool:
        for key, offset in list(self.required.items()):
            partition = self._partition(*key)
            if partition is None or not partition.is_leader:
                self.outcomes[key] = NotLeaderOrFollowerError()
            elif partition.low_watermark >= offset:
                self.outcomes[key] = partition.low_watermark
            else:
                continue
            del self.required[key]
        return not self.required and self.force_complete()

    def on_complete(self) -> None:
        for key in self.required:
            self.outcomes[key] = RequestTimedOutError(
                f"the replicas of {key[0]}-{key[1]} did not reach the new log start in time")
        done, self._done = self._done, None
        if done is not None:
            done(self.outcomes)
