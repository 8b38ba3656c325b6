"""Replication lag under load, read from the replicas' own files.

How a replica's log end offset is read: ListOffsets (LATEST) answers only on the leader and
gives the high watermark, not the log end; ``SamsaDescribeLogSegments`` refuses a follower
(NOT_LEADER_OR_FOLLOWER) and DescribeLogDirs gives bytes, not offsets. So every replica —
leader and followers alike, by the same method — is read from its partition directory
(``<log.dirs>/<topic>-<partition>/``), read only, by ``LogEndReader``: the newest ``.log``
segment is walked batch by batch from where the last reading stopped, reading only the first
27 bytes of each batch header, and the log end offset is one past the last offset of the last
complete batch. Samsa appends each batch with one ``pwritev`` and keeps no user-space buffer,
so the files show what the replica's log holds (the page cache, not the disk). A batch whose
bytes are not all in the file yet, or whose header is not a v2 header (bytes still being
written), ends the walk; the next reading resumes there. A file that shrank (a follower
truncating) or a newer segment restarts the walk at that segment's start.

On-disk layout read (``protocol.records``): each batch starts with base_offset int64,
batch_length int32 (bytes after this field), partition_leader_epoch int32, magic int8 (2),
crc uint32, attributes int16, last_offset_delta int32 — 27 bytes.

Lag, from samples taken every ``interval_s`` (``LagSampler``, a thread) of every replica's log
end offset for each partition of the topic:

- in records: the leader's log end offset minus the follower's, at the same sample;
- in seconds (``time_lag_s``): how long the oldest record the follower lacks has been in the
  leader's log, i.e. the sample time minus the time the leader's log end first passed the
  follower's log end, that moment interpolated linearly between the two leader samples around
  it (so the resolution is about the sampling interval); 0 for a follower caught up. This is
  the sense of Kafka's ``replica.lag.time.max.ms`` (time since the follower was last caught
  up), measured from outside.

State: a ``LogEndReader`` and a ``LagSampler``'s samples belong to the sampler's thread until
``LagSampler.stop`` returns; the pure functions keep none.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.distribution import Distribution

PREFIX = struct.Struct(">qiibIhi")  # base_offset .. last_offset_delta: 27 bytes
MAGIC_V2 = 2
MIN_BATCH_LENGTH = 49  # the 61-byte header minus base_offset and batch_length
LOG_OVERHEAD = 12  # base_offset + batch_length
DEFAULT_INTERVAL_S = 0.1

Read = Callable[[int, int], bytes]  # (position, length) -> the bytes there (maybe fewer)


@dataclass(frozen=True)
class Walked:
    """Where a walk over a segment's batches stopped: the position of the first batch not
    (completely) there, and the offset it would start at."""

    position: int
    next_offset: int


def walk_batches(read: Read, *, position: int, size: int, next_offset: int) -> Walked:
    """Walk complete batches from ``position`` up to ``size`` bytes; the log end after them."""
    while position + PREFIX.size <= size:
        prefix = read(position, PREFIX.size)
        if len(prefix) < PREFIX.size:
            break
        base_offset, batch_length, _, magic, _, _, last_offset_delta = PREFIX.unpack(prefix)
        end = position + LOG_OVERHEAD + batch_length
        if magic != MAGIC_V2 or batch_length < MIN_BATCH_LENGTH or end > size:
            break  # still being written (or not a batch): resume here next time
        position, next_offset = end, base_offset + last_offset_delta + 1
    return Walked(position, next_offset)


@dataclass
class LogEndReader:
    """A replica's log end offset from its partition directory (see the module docstring)."""

    directory: Path
    segment: Path | None = None
    walked: Walked = Walked(0, 0)

    def log_end_offset(self) -> int | None:
        """The log end offset now; None while the directory holds no segment."""
        newest = newest_segment(self.directory)
        if newest is None:
            return None
        base_offset = int(newest.name[:-len(".log")])
        try:
            size = newest.stat().st_size
        except FileNotFoundError:  # rolled and deleted in between: next time
            return self.walked.next_offset if self.segment else None
        if newest != self.segment or size < self.walked.position:
            self.segment, self.walked = newest, Walked(0, base_offset)
        with open(newest, "rb") as file:
            fd = file.fileno()
            self.walked = walk_batches(lambda at, length: os.pread(fd, length, at),
                                       position=self.walked.position, size=size,
                                       next_offset=self.walked.next_offset)
        return self.walked.next_offset


def newest_segment(directory: Path) -> Path | None:
    try:
        logs = [path for path in directory.iterdir() if path.name.endswith(".log")]
    except FileNotFoundError:
        return None
    return max(logs, key=lambda path: int(path.name[:-len(".log")]), default=None)


# -- the lag, from samples --------------------------------------------------------------------


def records_lag(leader_log_end: int, follower_log_end: int | None) -> int:
    """Records the follower lacks (a follower with no log yet lacks them all)."""
    return max(leader_log_end - (follower_log_end or 0), 0)


def time_lag_s(leader_times: Sequence[float], leader_log_ends: Sequence[int], at_s: float,
               follower_log_end: int | None) -> float:
    """Seconds the oldest record the follower lacks has been in the leader's log at ``at_s``.

    ``leader_times`` / ``leader_log_ends``: the leader's samples up to ``at_s``, in time order,
    log ends non-decreasing. The moment the leader's log end first exceeded the follower's is
    interpolated between the samples around it; before the first sample it is the first
    sample's time (a lower bound)."""
    follower = follower_log_end or 0
    if not leader_log_ends or leader_log_ends[-1] <= follower:
        return 0.0
    index = bisect.bisect_right(leader_log_ends, follower)  # first sample with log end > it
    if index == 0:
        return max(at_s - leader_times[0], 0.0)
    before_t, before = leader_times[index - 1], leader_log_ends[index - 1]
    after_t, after = leader_times[index], leader_log_ends[index]
    fraction = (follower + 1 - before) / (after - before)
    passed_s = before_t + min(max(fraction, 0.0), 1.0) * (after_t - before_t)
    return max(at_s - passed_s, 0.0)


@dataclass(frozen=True)
class Sample:
    """Every replica's log end offset of one partition at ``at_s`` (None: no log there yet)."""

    at_s: float
    log_ends: dict[int, int | None]  # node id -> log end offset


@dataclass(frozen=True)
class FollowerLag:
    """One follower of one partition at one sample."""

    partition: int
    follower: int
    at_s: float
    records: int
    seconds: float


def follower_lags(partition: int, leader: int, samples: Sequence[Sample]) -> list[FollowerLag]:
    """Every follower's lag at every sample where the leader's log end is known."""
    times: list[float] = []
    log_ends: list[int] = []
    lags = []
    for sample in samples:
        leader_end = sample.log_ends.get(leader)
        if leader_end is None:
            continue
        if log_ends and leader_end < log_ends[-1]:
            leader_end = log_ends[-1]  # a torn read never moves the leader back
        times.append(sample.at_s)
        log_ends.append(leader_end)
        for follower, follower_end in sorted(sample.log_ends.items()):
            if follower != leader:
                lags.append(FollowerLag(partition, follower, sample.at_s,
                                        records_lag(leader_end, follower_end),
                                        time_lag_s(times, log_ends, sample.at_s, follower_end)))
    return lags


def summarize_lags(lags: Sequence[FollowerLag]) -> dict[str, Any]:
    """The distribution of the lags in records and in milliseconds, over every follower of
    every partition at every sample."""
    if not lags:
        return {"samples": 0, "records": None, "ms": None}
    return {"samples": len(lags),
            "records": Distribution.of(lag.records for lag in lags).to_json(0),
            "ms": Distribution.of(lag.seconds * 1000 for lag in lags).to_json(1),
            "caught_up_fraction": round(sum(1 for lag in lags if lag.records == 0)
                                        / len(lags), 4)}


# -- the sampler thread -----------------------------------------------------------------------


@dataclass
class LagSampler:
    """Samples every replica of every partition every ``interval_s`` in a thread, from
    ``start`` until ``stop`` (which takes one last sample: a load shorter than the interval
    still gets one sample at its end). ``replicas``: partition -> node id -> directory."""

    replicas: dict[int, dict[int, Path]]
    interval_s: float = DEFAULT_INTERVAL_S
    samples: dict[int, list[Sample]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> LagSampler:
        readers = {partition: {node: LogEndReader(path) for node, path in nodes.items()}
                   for partition, nodes in self.replicas.items()}
        self.samples = {partition: [] for partition in self.replicas}
        self._thread = threading.Thread(target=self._run, args=(readers,), daemon=True,
                                        name="replication-lag-sampler")
        self._thread.start()
        return self

    def _run(self, readers: dict[int, dict[int, LogEndReader]]) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._sample(readers)
            next_at += self.interval_s
            self._stop.wait(max(next_at - time.monotonic(), 0.0))
        self._sample(readers)  # the last one when told to stop: the load has just ended

    def _sample(self, readers: dict[int, dict[int, LogEndReader]]) -> None:
        for partition, nodes in readers.items():
            at_s = time.monotonic()
            self.samples[partition].append(Sample(at_s, {
                node: reader.log_end_offset() for node, reader in nodes.items()}))

    def stop(self) -> dict[int, list[Sample]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples
