"""Delivering produced records' outcomes: their futures and ``on_delivery`` callbacks.

``Delivery`` objects complete the records of a batch once the sender knows its fate:
``ThreadDelivery`` for the blocking ``Producer``, whose batch entries are ``DeliveryFuture``s
(``concurrent.futures.Future``s carrying their record's timestamp, sizes and callback), and
``AsyncDelivery`` for ``AsyncProducer``, whose entries are ``(asyncio future, timestamp,
key_size, value_size, on_delivery)`` tuples.

Why ``DeliveryFuture`` is shaped like this: one is made per ``send()`` and most are never
looked at. It has no lock until someone waits on it or adds a callback (the base class
would build a ``Condition`` per record, which costs more than encoding the record), and its
``RecordMetadata`` is built only when asked for; resolving one is a few stores.
``RecordMetadata`` (a frozen dataclass) is built through a twin class with the same slots,
as ``protocol.records`` does for its records.

Threads: completion runs on the producer's event loop thread, callbacks first (in offset
order), then the future; a ``DeliveryFuture`` may be waited on from any thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

from samsa._accumulator import ProducerBatch
from samsa.types import RecordMetadata

__all__ = ["AsyncDelivery", "DeliveryCallback", "DeliveryFuture", "ThreadDelivery",
           "call_callback", "new_metadata"]

log = logging.getLogger("samsa.producer")

DeliveryCallback = Callable[[RecordMetadata | None, Exception | None], None]
_FINISHED = "FINISHED"  # concurrent.futures' state names
_PENDING = "PENDING"
_CREATING = threading.Lock()  # makes DeliveryFuture's Condition, once, when first needed


class _MetadataTwin:
    """Same slots as the frozen ``RecordMetadata``: filled with plain stores, then given that
    class (a frozen dataclass's ``__init__`` costs several times more, once per record)."""

    __slots__ = RecordMetadata.__slots__
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


def new_metadata(topic: str, partition: int, offset: int, timestamp: int, key_size: int,
                 value_size: int) -> RecordMetadata:
    metadata = _MetadataTwin()
    metadata.topic = topic
    metadata.partition = partition
    metadata.offset = offset
    metadata.timestamp = timestamp
    metadata.serialized_key_size = key_size
    metadata.serialized_value_size = value_size
    metadata.__class__ = RecordMetadata  # type: ignore[assignment]
    return metadata  # type: ignore[return-value]


class DeliveryFuture(concurrent.futures.Future[RecordMetadata]):
    """A ``concurrent.futures.Future`` made for one record per ``send()``: it has no lock
    until someone waits on it or adds a callback, and its ``RecordMetadata`` is built only
    when asked for. Most records' futures are never looked at, and the base class's
    ``Condition`` would cost more than encoding the record. It cannot be cancelled (the
    record is already queued)."""

    # Class-level defaults instead of an __init__: creating one costs a bare object, and
    # its attributes stay in the object's inline values (its __dict__ is never asked for).
    __init__ = object.__init__
    _state = _PENDING
    _exception: BaseException | None = None
    _lazy_condition: threading.Condition | None = None
    _lazy_waiters: list[Any] | None = None
    _lazy_callbacks: list[Any] | None = None
    _metadata: RecordMetadata | None = None
    # the record, set by send(); where it landed, set on delivery
    _timestamp = -1
    _key_size = -1
    _value_size = -1
    _callback: DeliveryCallback | None = None
    _offset = -1
    _landed: tuple[str, int, int] | None = None  # (topic, partition, log append time)

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        if self._lazy_condition is None:
            with _CREATING:  # two threads must end up with the same Condition
                if self._lazy_condition is None:
                    self._lazy_condition = threading.Condition()
        return self._lazy_condition

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        if self._lazy_waiters is None:  # only ever touched under _condition
            self._lazy_waiters = []
        return self._lazy_waiters

    @property
    def _done_callbacks(self) -> list[Any]:
        if self._lazy_callbacks is None:  # only ever touched under _condition
            self._lazy_callbacks = []
        return self._lazy_callbacks

    @property
    def _result(self) -> RecordMetadata | None:
        if self._metadata is None and self._landed is not None:
            self._metadata = _new_metadata(self, self._landed)
        return self._metadata

    @_result.setter
    def _result(self, value: RecordMetadata | None) -> None:
        self._metadata = value

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return self._state == _FINISHED

    def _fail(self, error: Exception) -> None:
        self._exception = error
        self._settle()

    def _settle(self) -> None:
        """Mark done (on the loop thread), its outcome already stored. Whoever waits on it or
        added a callback made the Condition first (then checked the state under it), so
        with no Condition yet there is nobody to tell; the state is set first so that a
        Condition made meanwhile is seen."""
        self._state = _FINISHED
        if self._lazy_condition is not None:
            self._notify()

    def _notify(self) -> None:
        with self._condition:
            for waiter in self._waiters:
                if self._exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            self._condition.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]


def _new_metadata(future: DeliveryFuture, landed: tuple[str, int, int]) -> RecordMetadata:
    topic, partition, log_append_time = landed
    metadata = _MetadataTwin()
    metadata.topic = topic
    metadata.partition = partition
    metadata.offset = future._offset
    metadata.timestamp = future._timestamp if log_append_time < 0 else log_append_time
    metadata.serialized_key_size = future._key_size
    metadata.serialized_value_size = future._value_size
    metadata.__class__ = RecordMetadata  # type: ignore[assignment]
    return metadata  # type: ignore[return-value]


def call_callback(callback: DeliveryCallback, metadata: RecordMetadata | None,
          error: Exception | None) -> None:
    try:
        callback(metadata, error)
    except Exception:
        log.exception("an on_delivery callback raised")


class ThreadDelivery:
    """Completes ``DeliveryFuture``s (the blocking producer): each batch record is the
    future itself, carrying its record's timestamp, sizes and callback."""

    @staticmethod
    def complete(batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        # Once per record on the loop thread: no allocation unless there is a callback (whose
        # RecordMetadata is built inline, as _new_metadata() would).
        topic, partition = batch.topic_partition
        landed = (topic, partition, log_append_time)
        offset = base_offset
        step = 1 if base_offset >= 0 else 0
        twin, metadata_class, finished = _MetadataTwin, RecordMetadata, _FINISHED
        for future in batch.records:
            future._offset = offset
            future._landed = landed
            callback = future._callback
            if callback is not None:
                metadata = twin()
                metadata.topic = topic
                metadata.partition = partition
                metadata.offset = offset
                metadata.timestamp = future._timestamp if log_append_time < 0 \
                    else log_append_time
                metadata.serialized_key_size = future._key_size
                metadata.serialized_value_size = future._value_size
                metadata.__class__ = metadata_class  # type: ignore[assignment]
                future._metadata = metadata
                try:
                    callback(metadata, None)
                except Exception:
                    log.exception("an on_delivery callback raised")
            offset += step
            future._state = finished  # DeliveryFuture._settle(), inlined
            if future._lazy_condition is not None:
                future._notify()

    @staticmethod
    def fail(batch: ProducerBatch, error: Exception) -> None:
        for future in batch.records:
            if future._callback is not None:
                call_callback(future._callback, None, error)
            future._fail(error)


class AsyncDelivery:
    """Completes asyncio futures (``AsyncProducer``)."""

    @staticmethod
    def complete(batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        topic, partition = batch.topic_partition
        offset = base_offset
        step = 1 if base_offset >= 0 else 0
        for future, timestamp, key_size, value_size, callback in batch.records:
            metadata = new_metadata(topic, partition, offset,
                                 timestamp if log_append_time < 0 else log_append_time,
                                 key_size, value_size)
            offset += step
            if callback is not None:
                call_callback(callback, metadata, None)
            if not future.done():
                future.set_result(metadata)

    @staticmethod
    def fail(batch: ProducerBatch, error: Exception) -> None:
        for future, _, _, _, callback in batch.records:
            if callback is not None:
                call_callback(callback, None, error)
            if not future.done():
                future.set_exception(error)
