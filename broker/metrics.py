"""Prometheus metrics on ``metrics.port`` (Samsa's key; 0 = off), served by prometheus-client.

Exposed (text format at ``http://HOST:PORT/metrics``, HOST = the first listener's host, so a
broker listening on loopback only serves its metrics there too):

- ``samsa_requests_total{api, version}`` — requests answered (or dropped for acks=0), by API
  name (``Produce``, ``Fetch``, …) and version;
- ``samsa_request_latency_seconds{api, version}`` — a histogram of the time from a request's
  frame being taken up to its response being queued for the socket (a long-poll fetch's wait
  included, the socket write not);
- ``samsa_network_received_bytes_total`` / ``samsa_network_sent_bytes_total`` — bytes read from
  client sockets / response bytes handed to them (file slices of a fetch counted by length);
- ``samsa_connections`` — client connections open now;
- ``samsa_partition_log_end_offset``, ``samsa_partition_log_start_offset``,
  ``samsa_partition_high_watermark``, ``samsa_partition_size_bytes`` ``{topic, partition}``;
- per share partition this node leads and has loaded (``{group, topic, partition}``, from
  ``SharePartition.describe``: deadlines due applied to the view, nothing changed):
  ``samsa_share_partition_start_offset`` / ``samsa_share_partition_end_offset`` (the share
  partition's start offset, below which every record is done, and the end of its in-flight
  window), ``samsa_share_partition_in_flight_records`` (end − start),
  ``samsa_share_partition_acquired_records`` (delivered, locked, not yet acknowledged),
  ``samsa_share_partition_dead_lettering_records`` (waiting for their dead-letter append),
  ``samsa_share_partition_max_delivery_count`` (the highest delivery count in the window, 0
  when empty), and the counters ``samsa_share_partition_archived_records_total`` (rejected,
  out of deliveries or expired, with no dead-letter topic), ``..._dead_lettered_records_total``
  (appended to the dead-letter topic) and ``..._expired_records_total`` (older than
  ``samsa.share.record.expiry.ms``). The counters count since the share partition was loaded
  on this node (a reload, a restart or a leadership change starts them again at 0, which
  Prometheus's ``rate`` reads as a counter reset).

Cost on the hot path: the connection adds to plain ints and lists owned by the event loop
(``RequestMetrics``); no prometheus-client objects, locks or label lookups per request. Every
metric is built at scrape time by ``BrokerCollector``, which runs on the HTTP server's thread
and reads the broker's state *on the event loop* (``call_soon_threadsafe``), since that state
is the loop's; a scrape that the loop does not serve within ``SCRAPE_TIMEOUT_SECONDS`` fails.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from threading import Thread
from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from broker.share.values import SharePartitionDescription
from storage.segment import FetchSlice

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from broker.broker import Broker
    from broker.server import Server

__all__ = ["LATENCY_BUCKETS_SECONDS", "MetricsServer", "RequestMetrics", "start_metrics"]

logger = logging.getLogger("samsa.broker.metrics")

# Upper bounds, in seconds; +Inf is added at scrape time.
LATENCY_BUCKETS_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                           0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SCRAPE_TIMEOUT_SECONDS = 5.0


@dataclass(slots=True)
class ApiLatency:
    """One (API, version)'s requests: count, sum, and per-bucket counts (not cumulative)."""

    count: int = 0
    total_seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_SECONDS) + 1))


class RequestMetrics:
    """What the connections count, in plain Python numbers; owned by the event loop."""

    __slots__ = ("bytes_in", "bytes_out", "requests")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.requests: dict[tuple[str, int], ApiLatency] = {}

    def observe(self, api: str, version: int, seconds: float) -> None:
        latency = self.requests.get((api, version))
        if latency is None:
            latency = self.requests[(api, version)] = ApiLatency()
        latency.count += 1
        latency.total_seconds += seconds
        latency.buckets[bisect.bisect_left(LATENCY_BUCKETS_SECONDS, seconds)] += 1

    def sent(self, parts: Iterable[Any]) -> None:
        for part in parts:
            self.bytes_out += part.length if isinstance(part, FetchSlice) else len(part)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    requests: list[tuple[tuple[str, int], int, float, list[int]]]
    bytes_in: int
    bytes_out: int
    connections: int
    partitions: list[tuple[str, int, int, int, int, int]]  # topic, partition, LEO, LSO, HW, size
    share_partitions: list[tuple[str, str, int, SharePartitionDescription]] = field(default_factory=list)


class BrokerCollector(Collector):
    """Builds every metric at scrape time from a snapshot taken on the event loop."""

    def __init__(self, broker: Broker, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self.broker = broker
        self.server = server
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        snapshot = self._snapshot()
        yield from _request_metrics(snapshot)
        yield from _partition_metrics(snapshot)
        yield from _share_partition_metrics(snapshot)

    def _snapshot(self) -> _Snapshot:
        future: concurrent.futures.Future[_Snapshot] = concurrent.futures.Future()

        def take() -> None:
            try:
                future.set_result(self._take_snapshot())
            except Exception as error:
                future.set_exception(error)

        self.loop.call_soon_threadsafe(take)
        return future.result(SCRAPE_TIMEOUT_SECONDS)

    def _take_snapshot(self) -> _Snapshot:
        counts = self.broker.metrics or RequestMetrics()
        requests = [(key, value.count, value.total_seconds, list(value.buckets))
                    for key, value in sorted(counts.requests.items())]
        partitions = [
            (topic, index, partition.log_end_offset, partition.log_start_offset,
             partition.high_watermark, partition.log.size_in_bytes)
            for (topic, index), partition in sorted(self.broker.replica_manager.partitions.items())
        ]
        return _Snapshot(requests, counts.bytes_in, counts.bytes_out,
                         len(self.server.connections), partitions, self._share_partitions())

    def _share_partitions(self) -> list[tuple[str, str, int, SharePartitionDescription]]:
        manager = self.broker.share_partitions
        if manager is None:
            return []
        now_ms = manager.clock.milliseconds()
        described = []
        for key in sorted(manager.loaded(), key=lambda key: (key.group_id, str(key.topic_id), key.partition)):
            entry = manager.entry(key)
            if entry is not None:
                described.append((key.group_id, entry.topic, key.partition,
                                  entry.share_partition.describe(now_ms)))
        return described


def _request_metrics(snapshot: _Snapshot) -> Iterator[Metric]:
    requests = CounterMetricFamily("samsa_requests", "Requests answered, by API and version",
                                   labels=["api", "version"])
    latency = HistogramMetricFamily(
        "samsa_request_latency_seconds",
        "From a request's frame taken up to its response queued, by API and version",
        labels=["api", "version"])
    for (api, version), count, total, buckets in snapshot.requests:
        labels = [api, str(version)]
        requests.add_metric(labels, count)
        cumulative, running = [], 0
        for bound, in_bucket in zip((*map(str, LATENCY_BUCKETS_SECONDS), "+Inf"), buckets,
                                    strict=True):
            running += in_bucket
            cumulative.append((bound, running))
        latency.add_metric(labels, cumulative, total)
    yield requests
    yield latency
    yield CounterMetricFamily("samsa_network_received_bytes", "Bytes read from client sockets",
                              value=snapshot.bytes_in)
    yield CounterMetricFamily("samsa_network_sent_bytes", "Response bytes sent to clients",
                              value=snapshot.bytes_out)
    yield GaugeMetricFamily("samsa_connections", "Client connections open",
                            value=snapshot.connections)


def _partition_metrics(snapshot: _Snapshot) -> Iterator[Metric]:
    names = (("samsa_partition_log_end_offset", "The next offset the partition's log assigns"),
             ("samsa_partition_log_start_offset", "The first offset kept in the partition's log"),
             ("samsa_partition_high_watermark", "The partition's high watermark"),
             ("samsa_partition_size_bytes", "Bytes in the partition's segment files"))
    families = [GaugeMetricFamily(name, text, labels=["topic", "partition"]) for name, text in names]
    for topic, index, *values in snapshot.partitions:
        for family, value in zip(families, values, strict=True):
            family.add_metric([topic, str(index)], value)
    yield from families


SHARE_GAUGES = (
    ("samsa_share_partition_start_offset", "The share partition's start offset (every record below it is done)",
     lambda d: d.start_offset),
    ("samsa_share_partition_end_offset", "The end of the share partition's in-flight window",
     lambda d: d.end_offset),
    ("samsa_share_partition_in_flight_records", "Records between the share partition's start and end offsets",
     lambda d: d.in_flight_record_count),
    ("samsa_share_partition_acquired_records", "Records delivered to a member and not yet acknowledged",
     lambda d: d.acquired_record_count),
    ("samsa_share_partition_dead_lettering_records", "Records waiting for their dead-letter append",
     lambda d: d.dead_lettering_record_count),
    ("samsa_share_partition_max_delivery_count", "The highest delivery count in the in-flight window",
     lambda d: max((batch.delivery_count for batch in d.batches), default=0)),
)
SHARE_COUNTERS = (
    ("samsa_share_partition_archived_records", "Records archived (rejected, out of deliveries or expired; "
     "no dead-letter topic) since the share partition was loaded", lambda d: d.archived_record_count),
    ("samsa_share_partition_dead_lettered_records", "Records appended to the dead-letter topic since the "
     "share partition was loaded", lambda d: d.dead_lettered_record_count),
    ("samsa_share_partition_expired_records", "Records older than samsa.share.record.expiry.ms since the "
     "share partition was loaded", lambda d: d.expired_record_count),
)


def _share_partition_metrics(snapshot: _Snapshot) -> Iterator[Metric]:
    labels = ["group", "topic", "partition"]
    gauges = [(GaugeMetricFamily(name, text, labels=labels), value) for name, text, value in SHARE_GAUGES]
    counters = [(CounterMetricFamily(name, text, labels=labels), value) for name, text, value in SHARE_COUNTERS]
    for group, topic, index, description in snapshot.share_partitions:
        names = [group, topic, str(index)]
        for gauge, value in gauges:
            gauge.add_metric(names, value(description))
        for counter, value in counters:
            counter.add_metric(names, value(description))
    yield from (gauge for gauge, _ in gauges)
    yield from (counter for counter, _ in counters)


@dataclass
class MetricsServer:
    http: WSGIServer
    thread: Thread
    host: str
    port: int

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join()


def start_metrics(broker: Broker, server: Server,
                  loop: asyncio.AbstractEventLoop) -> MetricsServer | None:
    """Serve ``/metrics`` on ``metrics.port`` (None when it is 0); counting starts here."""
    port = broker.config.metrics_port
    if port == 0:
        return None
    listeners = broker.config.listeners
    host = (listeners[0].host if listeners else "") or "0.0.0.0"
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, server, loop))
    broker.metrics = RequestMetrics()
    http, thread = start_http_server(port, addr=host, registry=registry)
    logger.info("metrics on http://%s:%d/metrics", host, port)
    return MetricsServer(http, thread, host, port)
