"""Producer workloads: idempotent ``acks=all`` producers with unique values, on librdkafka
(confluent-kafka) and on Samsa's own client, and a writer of a compacted topic with tombstones.

History written (see ``tests.faults.history``): per record a ``send`` invoke (process, topic,
key, value) written *before* the client is asked to produce it, then exactly one outcome with
the same fields: ``ok`` adds partition and offset, ``fail``/``info`` add ``error``. Values are
``"{process}-{n}"``, unique per run as long as process names are; a tombstone's value is
``null`` (its invoke carries ``tombstone: true``).

Client instances: a producer that hits a fatal error (librdkafka's idempotence gives up on a
sequence gap, Samsa's sender stops) is dropped — its unresolved sends written ``info`` — and a
new one is made with process name ``"{prefix}-{k+1}"``; the first is ``"{prefix}-0"``.

Threads: librdkafka serves delivery callbacks in ``poll``/``flush``, on the workload's thread;
Samsa's run on its producer's loop thread (``Pending`` locks).
"""

from __future__ import annotations

import functools
import logging
import random
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

import samsa
from tests.faults.history import History
from tests.faults.workload_base import (
    Pacer,
    Pending,
    Workload,
    error_code,
    is_definite_failure,
    new_rng,
    rdkafka_config,
)

__all__ = ["COMPACTED_TOPIC_CONFIGS", "CompactedWriter", "IdempotentProducer",
           "SamsaIdempotentProducer"]

log = logging.getLogger("tests.faults.workloads")

# A compacted topic whose segments roll often enough for the cleaner to run during a short run
# (the broker's log.cleaner.backoff.ms decides how soon it looks).
COMPACTED_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "2000",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "0.01",
}


class IdempotentProducer(Workload):
    """librdkafka's idempotent producer (``acks=all``), ``rate_per_second`` records with unique
    values and keys drawn from ``keys`` few (``"k0"``…), partitioned by librdkafka's key hash."""

    def __init__(self, bootstrap: str, history: History, process: str, topic: str,
                 seed: random.Random | int | None = None, *, rate_per_second: float = 50.0,
                 keys: int = 5, message_timeout_ms: int = 30_000,
                 config: dict[str, Any] | None = None) -> None:
        super().__init__(history, process)
        self.bootstrap = bootstrap
        self.topic = topic
        self.rng = new_rng(seed)
        self.rate_per_second = rate_per_second
        self.keys = [f"k{index}" for index in range(keys)]
        self.message_timeout_ms = message_timeout_ms
        self.extra_config = dict(config or {})
        self.pending = Pending(history)
        self.instances = 0
        self.sent = 0
        self.client_process = ""
        self._fatal: KafkaError | None = None

    # --- what a subclass varies -----------------------------------------------------------

    def next_record(self) -> tuple[str, str | None]:
        """The next record's (key, value)."""
        self.sent += 1
        return self.rng.choice(self.keys), f"{self.client_process}-{self.sent}"

    def producer_config(self) -> dict[str, Any]:
        return rdkafka_config(
            self.bootstrap, **{
                "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                "message.timeout.ms": self.message_timeout_ms,
                "error_cb": self._client_error, **self.extra_config})

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        producer = self._open()
        pacer = Pacer(self.rate_per_second, self._stopping)
        while pacer.wait():
            if self._fatal is not None:
                self._close(producer, f"fatal client error: {self._fatal}")
                producer = self._open()
            self._send_one(producer)
            producer.poll(0)
        self._close(producer, "unresolved when the workload stopped")

    def _open(self) -> confluent_kafka.Producer:
        self.client_process = f"{self.process}-{self.instances}"
        self.instances += 1
        self._fatal = None
        return confluent_kafka.Producer(self.producer_config())

    def _invoke_next(self) -> tuple[int, str, str | None]:
        """The next record's number, key and value, its ``send`` invoke written."""
        key, value = self.next_record()
        number = self.sent
        fields: dict[str, Any] = {"process": self.client_process, "topic": self.topic,
                                  "key": key, "value": value}
        if value is None:
            fields["tombstone"] = True
        self.pending.invoke(number, "send", **fields)
        return number, key, value

    def _send_one(self, producer: confluent_kafka.Producer) -> None:
        number, key, value = self._invoke_next()
        try:
            producer.produce(self.topic, key=key, value=value,
                             on_delivery=functools.partial(self._delivered, number))
        except BufferError as error:  # librdkafka's queue is full: never enqueued
            self.pending.complete(number, "fail", error=f"BufferError: {error}")
        except KafkaException as error:  # raised by produce(): the record was not enqueued
            self.pending.complete(number, "fail", error=str(error))
            self._note_fatal(error.args[0] if error.args else None)

    def _delivered(self, number: int, error: KafkaError | None, message: Any) -> None:
        if error is None:
            self.pending.complete(number, "ok", partition=message.partition(),
                                  offset=message.offset())
            return
        outcome = "fail" if is_definite_failure(error.code()) else "info"
        self.pending.complete(number, outcome, error=str(error))
        self._note_fatal(error)

    def _client_error(self, error: KafkaError) -> None:
        log.debug("%s: client error %s", self.client_process, error)
        self._note_fatal(error)

    def _note_fatal(self, error: Any) -> None:
        if isinstance(error, KafkaError) and error.fatal():
            self._fatal = error

    def _close(self, producer: confluent_kafka.Producer, reason: str) -> None:
        """Wait for what is in flight (bounded by message.timeout.ms), then purge the rest:
        a purged queued record was never sent (``fail``), an in-flight one is ``info``."""
        producer.flush(self.message_timeout_ms / 1000 + 5)
        if len(self.pending):
            producer.purge(in_queue=True, in_flight=True)
            producer.flush(5)
        self.pending.abandon(reason)


class CompactedWriter(IdempotentProducer):
    """An idempotent writer of a compacted topic (create it with ``COMPACTED_TOPIC_CONFIGS``):
    keys over a small set, unique values, and ``tombstone_fraction`` of the records
    tombstones (value ``None``)."""

    def __init__(self, bootstrap: str, history: History, process: str, topic: str,
                 seed: random.Random | int | None = None, *, tombstone_fraction: float = 0.1,
                 **options: Any) -> None:
        super().__init__(bootstrap, history, process, topic, seed, **options)
        self.tombstone_fraction = tombstone_fraction

    def next_record(self) -> tuple[str, str | None]:
        key, value = super().next_record()
        if self.rng.random() < self.tombstone_fraction:
            return key, None
        return key, value


# Samsa's client raises its own error classes; these codes mean "never written" as above.
_SAMSA_NOT_WRITTEN = frozenset({10, 17, 18, 21, 29, 31, 32, 43, 87})


class SamsaIdempotentProducer(IdempotentProducer):
    """The same workload on Samsa's own producer (``samsa.Producer``, idempotent, ``acks=all``,
    ``delivery.timeout.ms`` bounding each record as ``message.timeout.ms`` does above)."""

    def run(self) -> None:
        producer = self._open_samsa()
        pacer = Pacer(self.rate_per_second, self._stopping)
        while pacer.wait():
            if self._fatal is not None:
                self._close_samsa(producer, f"fatal client error: {self._fatal}")
                producer = self._open_samsa()
            self._send_samsa(producer)
        self._close_samsa(producer, "unresolved when the workload stopped")

    def _open_samsa(self) -> samsa.Producer:
        self.client_process = f"{self.process}-{self.instances}"
        self.instances += 1
        self._fatal = None
        return samsa.Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "request.timeout.ms": min(10_000, self.message_timeout_ms // 2),
            "max.block.ms": 10_000,  # send() waiting for metadata of a cluster that is down
            "delivery.timeout.ms": self.message_timeout_ms, **self.extra_config})

    def _send_samsa(self, producer: samsa.Producer) -> None:
        number, key, value = self._invoke_next()
        try:
            producer.send(self.topic, value, key,
                          on_delivery=functools.partial(self._samsa_delivered, number))
        except samsa.KafkaError as error:  # raised by send(): the record was not queued
            self.pending.complete(number, "fail", error=repr(error))
            if not isinstance(error, samsa.KafkaTimeoutError):
                self._fatal = error  # type: ignore[assignment]  # the sender stopped

    def _samsa_delivered(self, number: int, metadata: Any, error: Exception | None) -> None:
        if error is None:
            self.pending.complete(number, "ok", partition=metadata.partition,
                                  offset=metadata.offset)
            return
        definite = error_code(error) in _SAMSA_NOT_WRITTEN
        self.pending.complete(number, "fail" if definite else "info", error=repr(error))

    def _close_samsa(self, producer: samsa.Producer, reason: str) -> None:
        try:
            producer.flush(self.message_timeout_ms / 1000 + 5)
        except samsa.KafkaError as error:
            log.info("%s: flush at close: %r", self.client_process, error)
        try:
            producer.close(timeout=5)  # fails what is left: their callbacks write info
        except samsa.KafkaError as error:
            log.info("%s: close: %r", self.client_process, error)
        self.pending.abandon(reason)
