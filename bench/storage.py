"""Storage benchmark: Samsa's Log against the machine's own limits, in one run, same disk.

Cases, for 16 KiB and for 1 MiB batches (``--mib`` of them per case, 512 by default):

- append: ``Log.append_as_leader`` (validate header + CRC, assign offsets, write, index) into a
  new log vs sequential ``os.write`` of the very same bytes to a new file; both end with one
  fsync. The previous round's log is deleted first, so the disk holds one copy of each.
- recovery: ``Log.open`` after an unclean shutdown (every batch's header and CRC checked,
  indexes rebuilt) of the latest log vs reading the same files with ``os.read``.
- fetch: ``Log.read`` slices sent with ``os.sendfile`` over a loopback TCP socket vs
  ``os.sendfile`` of the raw files in the same chunk size.

Each comparison runs ``--rounds`` (5) interleaved rounds, Samsa and the baseline alternating
which goes first (the page cache's write-back of one run slows whichever runs next, so a fixed
order is biased; ``bench.rounds``), and reports each side's MB/s as the median (min–max) of
its rounds and Samsa ÷ baseline as the median (min–max) of the paired per-round ratios.

Prints a table (rich) and writes ``bench/results/storage.json`` with every round's figures, the
date, the machine and the load before and after.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from bench import rounds
from protocol.records import Record, encode_batch
from storage.clock import SYSTEM_CLOCK
from storage.config import LogConfig
from storage.log import Log
from storage.segment import FetchSlice

RESULTS = Path(__file__).parent / "results"
MIB = 1024 * 1024


def make_batch(batch_bytes: int, value_bytes: int = 1000) -> bytes:
    """One uncompressed batch of about ``batch_bytes`` made of ``value_bytes`` records."""
    count = max(1, batch_bytes // (value_bytes + 20))
    now = SYSTEM_CLOCK.milliseconds()
    value = os.urandom(value_bytes)
    records = [Record(offset=i, timestamp=now, key=None, value=value) for i in range(count)]
    return encode_batch(records, base_offset=0)


def _timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def write_chunks(path: Path, chunks: Iterable[bytes | memoryview], *, fsync: bool = False) -> float:
    """Seconds to ``os.write`` every chunk, in order, to a new file ``path`` (then fsync it
    if asked): the machine's limit for appending those bytes."""
    def run() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for chunk in chunks:
                os.write(fd, chunk)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    return _timed(run)


def log_append(directory: Path, batch: bytes, count: int) -> tuple[float, Log]:
    config = LogConfig(max_message_bytes=len(batch) + 1, message_timestamp_after_max_ms=2**62)
    log = Log.open(directory, config, clock=SYSTEM_CLOCK)

    def run() -> None:
        for _ in range(count):
            log.append_as_leader(batch)
        log.flush()

    return _timed(run), log


def raw_read(paths: list[Path]) -> float:
    def run() -> None:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                while os.read(fd, 8 * MIB):
                    pass
            finally:
                os.close(fd)

    return _timed(run)


def recovery(directory: Path) -> float:
    def run() -> None:
        log = Log.open(directory, LogConfig(), clock=SYSTEM_CLOCK, had_clean_shutdown=False)
        log.close()

    return _timed(run)


def _drain(server: socket.socket) -> None:
    connection, _ = server.accept()
    with connection:
        while connection.recv(4 * MIB):
            pass


def _send_over_loopback(send: Callable[[socket.socket], None]) -> float:
    """Seconds to ``send`` everything and have the receiver read it all (until EOF)."""
    server = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=_drain, args=(server,), daemon=True)
    thread.start()
    client = socket.create_connection(server.getsockname())
    try:
        start = time.perf_counter()
        send(client)
        client.shutdown(socket.SHUT_WR)
        thread.join()
        return time.perf_counter() - start
    finally:
        client.close()
        server.close()


def _sendfile_all(sock: socket.socket, fd: int, position: int, length: int) -> None:
    while length > 0:
        sent = os.sendfile(sock.fileno(), fd, position, length)
        position += sent
        length -= sent


def log_fetch(log: Log, chunk: int) -> float:
    def send(sock: socket.socket) -> None:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            piece = log.read(offset, chunk)
            assert piece is not None
            _sendfile_all(sock, piece.fd, piece.position, piece.length)
            offset = _next_offset_after(log, piece)

    return _send_over_loopback(send)


def _next_offset_after(log: Log, piece: FetchSlice) -> int:
    """The offset after the last whole batch in ``piece`` (a header walk, as a client does)."""
    segment = next(s for s in log.segments if s.log_path == piece.path)
    next_offset = piece.first_offset
    for _, header in segment.scan_headers(piece.position, piece.position + piece.length):
        next_offset = header.next_offset
    return next_offset


def raw_fetch(paths: list[Path], chunk: int) -> float:
    def send(sock: socket.socket) -> None:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                for position in range(0, size, chunk):
                    _sendfile_all(sock, fd, position, min(chunk, size - position))
            finally:
                os.close(fd)

    return _send_over_loopback(send)


@dataclass
class Case:
    """One batch size: the batch, how many, and the latest log Samsa wrote (``None`` before
    the first append round)."""

    label: str
    directory: Path
    batch: bytes
    count: int
    log_directory: Path | None = None

    @property
    def total(self) -> int:
        return len(self.batch) * self.count

    def segment_paths(self) -> list[Path]:
        assert self.log_directory is not None
        return sorted(self.log_directory.glob("*.log"))


def append_rounds(case: Case, rounds_count: int, progress: Progress) -> rounds.Rounds[float]:
    def measure(system: str, round_index: int) -> float:
        if system == "baseline":
            raw_path = case.directory / f"raw-{len(case.batch)}.bin"
            seconds = write_chunks(raw_path, itertools.repeat(case.batch, case.count), fsync=True)
            raw_path.unlink()
            return seconds
        if case.log_directory is not None:
            shutil.rmtree(case.log_directory)
        case.log_directory = case.directory / f"bench-{len(case.batch)}-{round_index}"
        seconds, log = log_append(case.log_directory, case.batch, case.count)
        log.close()
        return seconds

    return rounds.run_rounds(["samsa", "baseline"], rounds_count, measure, progress=progress,
                             label=f"append {case.label}: ")


def recovery_rounds(case: Case, rounds_count: int, progress: Progress) -> rounds.Rounds[float]:
    def measure(system: str, round_index: int) -> float:
        assert case.log_directory is not None
        if system == "baseline":
            return raw_read(case.segment_paths())
        return recovery(case.log_directory)

    return rounds.run_rounds(["samsa", "baseline"], rounds_count, measure, progress=progress,
                             label=f"recovery {case.label}: ")


def fetch_rounds(case: Case, rounds_count: int, progress: Progress) -> rounds.Rounds[float]:
    assert case.log_directory is not None
    log = Log.open(case.log_directory, LogConfig(), clock=SYSTEM_CLOCK, had_clean_shutdown=True)

    def measure(system: str, round_index: int) -> float:
        if system == "baseline":
            return raw_fetch(case.segment_paths(), MIB)
        return log_fetch(log, MIB)

    try:
        return rounds.run_rounds(["samsa", "baseline"], rounds_count, measure,
                                 progress=progress, label=f"fetch {case.label}: ")
    finally:
        log.close()


def run_cases(directory: Path, mib: int, rounds_count: int,
              progress: Progress) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for label, size in (("16 KiB", 16 * 1024), ("1 MiB", MIB)):
        batch = make_batch(size)
        case = Case(label, directory, batch, max(1, mib * MIB // len(batch)))
        for name, baseline, measure in (
            (f"append {label} batches (+ final fsync)", "os.write", append_rounds),
            (f"recovery scan, {label} batches", "os.read", recovery_rounds),
            (f"Log.read + os.sendfile, {label} batches", "os.sendfile", fetch_rounds),
        ):
            done = measure(case, rounds_count, progress)
            rows.append(_row(name, baseline, case.total, done))
        assert case.log_directory is not None
        shutil.rmtree(case.log_directory)
    return rows


def _row(case: str, baseline: str, total: int, done: rounds.Rounds[float]) -> dict[str, Any]:
    def mb_s(seconds: float) -> float:
        return total / seconds / 1e6

    return {**rounds.versus_row(case, baseline, done, mb_s), "bytes": total,
            "rounds": rounds.rounds_json(done, lambda seconds: {"seconds": round(seconds, 4)})}


def print_table(result: dict[str, Any], console: Console) -> None:
    console.print(rounds.versus_table(
        f"Samsa storage vs the raw disk (same run, same directory, {result['mib_per_case']} MiB "
        f"per case): median (min–max) of {result['rounds_per_case']} interleaved rounds",
        result["rows"], rounds.caption(result["environment"])))


def main(directory: Path | None = None, mib: int = 512, json_path: Path | None = None,
         rounds_count: int = rounds.DEFAULT_ROUNDS) -> None:
    console = rounds.console()
    environment = rounds.environment()
    with (
        tempfile.TemporaryDirectory(dir=directory, prefix="samsa-bench-") as temp,
        Progress(console=console, transient=True) as progress,
    ):
        rows = run_cases(Path(temp), mib, rounds_count, progress)
    result = {"bench": "storage", "environment": rounds.finish(environment),
              "mib_per_case": mib, "rounds_per_case": rounds_count, "rows": rows}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "storage.json", console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.storage",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--mib", type=int, default=512, help="MiB written per case")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds per comparison (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(directory=arguments.dir, mib=arguments.mib, json_path=arguments.json,
         rounds_count=arguments.rounds)
