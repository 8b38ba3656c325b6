"""The broker bench's comparisons of Samsa with this machine's limits, in interleaved rounds.

Samsa only (``bench.broker`` runs these against its running Samsa broker):

- Large records: 20,000 × 10 KiB through the broker bench's
  confluent-kafka clients (consumer ``max.partition.fetch.bytes`` 8 MiB), a new topic each
  round, against the machine's limits on the very bytes Samsa wrote: ``os.write`` of its
  segment files' contents in 1 MiB writes to a new file (page cache, no fsync — Samsa's
  default ``flush.messages`` does not fsync either), and ``os.sendfile`` of those segment files
  over a loopback TCP socket. The baseline uses the segment files of the latest Samsa round:
  round 1 runs Samsa first, and from then on the order alternates (a baseline that goes first
  reads the previous round's files, of the same size).
- Ingest of 1 MiB batches: raw ProduceRequests v9 built with ``protocol`` (one ~1 MiB
  uncompressed RecordBatch of 1,000-byte values each, acks=1, 5 in flight on one connection —
  librdkafka's default window) to a new topic each round vs ``os.write`` of the same batches.

Reported as MB/s of segment (or batch) bytes, median (min–max) over rounds; Samsa ÷ baseline
as the median (min–max) of the paired per-round ratios; and the broker's CPU seconds per GB.

Disk: Samsa keeps every round's topic (5 × ~210 MB and 5 × 256 MiB at full size, written back
from the page cache in the background, as the baseline's file is): deleting a topic after its
round would put Samsa's delayed segment deletion inside a later measurement.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from bench import peers, rounds
from bench.broker_clients import (
    LARGE_CONSUMER,
    SMALL_PRODUCER,
    Settings,
    Workload,
    client_round,
    create_topic,
    timed,
)
from bench.storage import MIB, make_batch, raw_fetch, write_chunks
from protocol.frames import encode_request
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.request_header import RequestHeader

PRODUCE_VERSION = 9
IN_FLIGHT = 5
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class Transfer:
    """Bytes moved in some seconds; for Samsa, with the broker's CPU seconds meanwhile."""

    bytes: int
    seconds: float
    cpu_seconds: float | None = None

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6


LimitRound = dict[str, Transfer]  # by phase: "produce", "consume"


# -- raw 1 MiB ProduceRequests ----------------------------------------------------------------


def produce_frame(topic: str, batch: bytes) -> bytearray:
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]),
    ])
    header = RequestHeader(request_api_key=0, request_api_version=PRODUCE_VERSION,
                           correlation_id=0, client_id="samsa-bench")
    return bytearray(encode_request(header, request))


def raw_ingest(bootstrap: str, topic: str, batch: bytes, count: int) -> None:
    """``count`` ProduceRequests of ``batch``, ``IN_FLIGHT`` at a time; every answer checked."""
    host, port = bootstrap.rsplit(":", 1)
    frame = produce_frame(topic, batch)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        while answered < count:
            while sent < count and sent - answered < IN_FLIGHT:
                _SIZE.pack_into(frame, 8, sent)  # correlation id: after size, api key, version
                sock.sendall(frame)
                sent += 1
            _check_produce_answer(_read_frame(sock), answered)
            answered += 1


def _read_frame(sock: socket.socket) -> memoryview:
    size = _SIZE.unpack(_read_exactly(sock, 4))[0]
    return memoryview(_read_exactly(sock, size))


def _read_exactly(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        read = sock.recv_into(view[got:])
        if read == 0:
            raise ConnectionError("the broker closed the connection")
        got += read
    return buffer


def _check_produce_answer(frame: memoryview, correlation_id: int) -> None:
    if _SIZE.unpack_from(frame, 0)[0] != correlation_id:
        raise RuntimeError("answers out of order")
    response, _ = ProduceResponse.decode_from(frame, 5, PRODUCE_VERSION)  # header v1: id + tags
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                raise RuntimeError(f"produce failed with error code {partition.error_code}")


# -- the machine's limits ---------------------------------------------------------------------


def raw_append(sources: list[Path], target: Path) -> float:
    """Seconds to ``os.write`` the sources' bytes to ``target`` in 1 MiB writes (no fsync)."""
    view = memoryview(b"".join(path.read_bytes() for path in sources))
    return write_chunks(target, (view[position:position + MIB]
                                 for position in range(0, len(view), MIB)))


def segment_files(log_dir: Path, topic: str) -> list[Path]:
    return sorted((log_dir / f"{topic}-0").glob("*.log"))


# -- the cases --------------------------------------------------------------------------------


def large_records(broker: peers.BrokerProcess, work: Path, settings: Settings,
                  progress: Progress) -> list[dict[str, Any]]:
    workload = Workload(settings.large_count, 10 * 1024, SMALL_PRODUCER, LARGE_CONSUMER)
    data_dir = broker.data_dir
    assert data_dir is not None
    latest: list[Path] = []

    def measure(system: str, round_index: int) -> LimitRound:
        if system == "baseline":
            total = sum(path.stat().st_size for path in latest)
            return {"produce": Transfer(total, raw_append(latest, work / "raw-large.bin")),
                    "consume": Transfer(total, raw_fetch(latest, MIB))}
        topic = f"bench-large-{round_index}"
        done = client_round(broker, topic, workload)
        latest[:] = segment_files(data_dir, topic)
        total = sum(path.stat().st_size for path in latest)
        return {phase: Transfer(total, getattr(done, phase).seconds,
                                getattr(done, phase).cpu_seconds)
                for phase in ("produce", "consume")}

    done = rounds.run_rounds(["samsa", "baseline"], settings.rounds, measure, progress=progress,
                             label="large records vs os.write/os.sendfile: ")
    case = f"{workload.count:,} × 10 KiB records"
    return [_row(f"{case}, produce", "os.write", done, "produce"),
            _row(f"{case}, consume", "os.sendfile", done, "consume")]


def ingest(broker: peers.BrokerProcess, work: Path, settings: Settings,
           progress: Progress) -> list[dict[str, Any]]:
    batch = make_batch(MIB)
    total = len(batch) * settings.ingest_batches

    def measure(system: str, round_index: int) -> LimitRound:
        if system == "baseline":
            batches = itertools.repeat(batch, settings.ingest_batches)
            return {"produce": Transfer(total, write_chunks(work / "raw-ingest.bin", batches))}
        topic = f"bench-ingest-{round_index}"
        create_topic(broker.bootstrap, topic)
        phase = timed(broker, lambda: raw_ingest(broker.bootstrap, topic, batch,
                                                 settings.ingest_batches))
        return {"produce": Transfer(total, phase.seconds, phase.cpu_seconds)}

    done = rounds.run_rounds(["samsa", "baseline"], settings.rounds, measure, progress=progress,
                             label="1 MiB batches vs os.write: ")
    return [_row(f"{settings.ingest_batches} × 1 MiB batches, produce v{PRODUCE_VERSION}",
                 "os.write", done, "produce")]


def _row(case: str, baseline: str, done: rounds.Rounds[LimitRound], phase: str) -> dict[str, Any]:
    def mb_s(measured: LimitRound) -> float:
        return measured[phase].mb_s

    def cpu_s_per_gb(measured: LimitRound) -> float:
        transfer = measured[phase]
        return (transfer.cpu_seconds or 0.0) / (transfer.bytes / 1e9)

    return {**rounds.versus_row(case, baseline, done, mb_s),
            "broker_cpu_s_per_gb": rounds.spread_json(done.spread("samsa", cpu_s_per_gb)),
            "rounds": rounds.rounds_json(done, lambda measured: _transfer_json(measured[phase]))}


def _transfer_json(transfer: Transfer) -> dict[str, Any]:
    return {"bytes": transfer.bytes, "seconds": round(transfer.seconds, 4),
            "mb_s": round(transfer.mb_s, 1),
            **({} if transfer.cpu_seconds is None
               else {"broker_cpu_seconds": round(transfer.cpu_seconds, 4)})}


CASES: tuple[Callable[..., list[dict[str, Any]]], ...] = (large_records, ingest)


def run(broker: peers.BrokerProcess, work: Path, settings: Settings,
        progress: Progress) -> list[dict[str, Any]]:
    return [row for case in CASES for row in case(broker, work, settings, progress)]


def print_table(rows: list[dict[str, Any]], console: Console, caption: str) -> None:
    console.print(rounds.versus_table(
        "Samsa vs this machine's limits (same run, same bytes): median (min–max) of "
        "interleaved rounds", rows, caption))
