"""Network mode: a task reads its offset range from the partition's leader over the Kafka protocol.

``NetworkReader.read(range)`` sends Fetch requests (v4-v12: topics by name; the
``isolation.level`` configured, read_committed leaving out aborted transactions with the list
each response brings, see ``pyspark_samsa.aborted``; no fetch session) for ``[start, end)`` of one partition and yields Arrow
record batches of exactly the records in the range (``pyspark_samsa.arrow``). The next fetch
is sent as soon as a response arrives (its offset read from the batch headers), so the broker
and the network work while this thread decodes. Retriable errors (leader moved, broker
restarting) are retried after a metadata refresh, with the client's backoff, until
``default.api.timeout.ms``. OFFSET_OUT_OF_RANGE below the log start offset, or a log that
ends before the range does, is data loss (``failOnDataLoss``).

State: one ``Cluster`` on one ``LoopThread`` per reader; the task's thread only waits on
futures. Readers are pooled per Python worker process and client configuration
(``pooled_reader``), as Spark's Kafka source pools its consumers per executor: Spark reuses
its Python workers from task to task, and a task then starts without connecting anew. A
pooled reader serves one task at a time (Spark runs one task per Python worker); the least
recently used beyond ``POOL_SIZE`` is closed, the rest when the process exits.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from protocol.errors import OffsetOutOfRangeError, error_for_code
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse, PartitionData
from pyspark_samsa.aborted import AbortedTransactions
from pyspark_samsa.arrow import decode_batches
from pyspark_samsa.loss import report_data_loss
from pyspark_samsa.planning import OffsetRange
from samsa._cluster import Cluster
from samsa._loop import LoopThread
from samsa.types import TopicPartition

__all__ = ["NetworkReader", "next_fetch_offset", "pooled_reader"]

MAX_FETCH_VERSION = 12  # v13+ name topics by id; names are what a range knows
_BATCH_PREFIX = struct.Struct(">qi")  # base_offset, batch_length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
POOL_SIZE = 4


def next_fetch_offset(records: Any) -> int | None:
    """The offset after the last whole batch in ``records`` (None if there is none), from the
    batch headers alone."""
    view = memoryview(records).cast("B")
    position, size, result = 0, len(view), None
    while position + 61 <= size:
        base_offset, batch_length = _BATCH_PREFIX.unpack_from(view, position)
        end = position + 12 + batch_length
        if end > size or batch_length < 49:
            break
        result = base_offset + _LAST_OFFSET_DELTA.unpack_from(view, position + _LAST_OFFSET_DELTA_AT)[0] + 1
        position = end
    return result


class NetworkReader:
    """Fetches offset ranges over the Kafka protocol (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._loop = LoopThread("pyspark-samsa-fetch")
        self._cluster = Cluster(config)
        self._timeout = (config["default.api.timeout.ms"] + config["request.timeout.ms"]) / 1000
        self._isolation_level = 1 if config["isolation.level"] == "read_committed" else 0

    def close(self) -> None:
        try:
            self._loop.run(self._cluster.close(), timeout=10)
        finally:
            self._loop.close()

    def read(self, offsets: OffsetRange, *, include_headers: bool,
             fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
        tp = offsets.topic_partition
        offset = offsets.start
        pending = self._submit(tp, offset)  # always the fetch of ``offset``
        aborted = AbortedTransactions() if self._isolation_level else None
        try:
            while True:
                answer = pending.result(self._timeout)
                if answer.error_code == OffsetOutOfRangeError.code:
                    offset = _skip_lost(tp, offset, offsets.end, answer, fail_on_data_loss)
                    if offset >= offsets.end:
                        return
                    pending = self._submit(tp, offset)
                    continue
                records = answer.records if answer.records is not None else b""
                if aborted is not None and answer.aborted_transactions:
                    aborted.add((transaction.producer_id, transaction.first_offset)
                                for transaction in answer.aborted_transactions)
                ahead = next_fetch_offset(records)
                if ahead is not None and ahead < offsets.end:
                    pending = self._submit(tp, ahead)  # fetched while this one is decoded
                decoded = decode_batches(records, start=offset, end=offsets.end, topic=tp.topic,
                                         partition=tp.partition, include_headers=include_headers,
                                         aborted=aborted)
                if decoded.batch is not None:
                    yield decoded.batch
                if decoded.reached_end:
                    return
                if decoded.next_offset is None:
                    _report_short_log(tp, offset, offsets.end, answer, fail_on_data_loss)
                    return
                offset = decoded.next_offset
                if offset >= offsets.end:
                    return
                if offset != ahead:  # not what was fetched ahead (never expected)
                    pending.cancel()
                    pending = self._submit(tp, offset)
        finally:
            pending.cancel()

    def _submit(self, tp: TopicPartition, offset: int) -> concurrent.futures.Future[PartitionData]:
        return self._loop.submit(self._fetch(tp, offset))

    async def _fetch(self, tp: TopicPartition, offset: int) -> PartitionData:
        cluster, config = self._cluster, self._config

        async def attempt() -> PartitionData:
            if cluster.metadata_is_stale:  # e.g. after NOT_LEADER_OR_FOLLOWER: find the leader
                await cluster.refresh_metadata([tp.topic])
            connection = await cluster.connection(await cluster.leader_for(tp))
            version = connection.version_for(FetchRequest, max_version=MAX_FETCH_VERSION)
            request = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=config["fetch.max.bytes"],
                isolation_level=self._isolation_level, session_id=0, session_epoch=-1,
                topics=[FetchTopic(topic=tp.topic, partitions=[FetchPartition(
                    partition=tp.partition, fetch_offset=offset,
                    partition_max_bytes=config["max.partition.fetch.bytes"])])])
            response: FetchResponse = await connection.request(request, version)
            if response.error_code:
                raise error_for_code(response.error_code)(f"fetching {tp.topic}-{tp.partition}")
            answer = response.responses[0].partitions[0]
            if answer.error_code and answer.error_code != OffsetOutOfRangeError.code:
                raise error_for_code(answer.error_code)(f"fetching {tp.topic}-{tp.partition}")
            return answer

        return await cluster.retrying(attempt, what=f"fetching {tp.topic}-{tp.partition}")


def _skip_lost(tp: TopicPartition, offset: int, end: int, answer: PartitionData,
               fail_on_data_loss: bool) -> int:
    """OFFSET_OUT_OF_RANGE: the next offset to read (``end`` when nothing more is there)."""
    if 0 <= offset < answer.log_start_offset:
        report_data_loss(
            f"Cannot fetch offset {offset} (TopicPartition: {tp.topic}-{tp.partition}): the "
            f"earliest available offset is {answer.log_start_offset}, records in [{offset}, "
            f"{min(answer.log_start_offset, end)}) are skipped.",
            fail_on_data_loss=fail_on_data_loss)
        return min(answer.log_start_offset, end)
    report_data_loss(
        f"Cannot fetch offset {offset} (TopicPartition: {tp.topic}-{tp.partition}): the log "
        f"ends at {answer.high_watermark}, records in [{offset}, {end}) are skipped.",
        fail_on_data_loss=fail_on_data_loss)
    return end


def _report_short_log(tp: TopicPartition, offset: int, end: int, answer: PartitionData,
                      fail_on_data_loss: bool) -> None:
    """A fetch below ``end`` that returned no whole batch: the log ends before the range."""
    report_data_loss(
        f"Cannot fetch offset {offset} (TopicPartition: {tp.topic}-{tp.partition}): the high "
        f"watermark is {answer.high_watermark}, records in [{offset}, {end}) are not there.",
        fail_on_data_loss=fail_on_data_loss)


_pool: OrderedDict[str, NetworkReader] = OrderedDict()
_pool_lock = threading.Lock()


def pooled_reader(config: dict[str, Any]) -> NetworkReader:
    """This process's reader for ``config`` (opened on first use; see the module docstring)."""
    key = repr(sorted(config.items()))
    with _pool_lock:
        reader = _pool.pop(key, None)
        if reader is None:
            reader = NetworkReader(config)
        _pool[key] = reader
        stale = [_pool.popitem(last=False)[1] for _ in range(len(_pool) - POOL_SIZE)]
    for old in stale:
        old.close()
    return reader


@atexit.register
def _close_pool() -> None:
    with _pool_lock:
        readers = list(_pool.values())
        _pool.clear()
    for reader in readers:
        reader.close()
