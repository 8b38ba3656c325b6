"""Storage benchmark: Samsa's Log against the machine's own limits, in one run, same disk.

Cases (each reported as MB/s and as a ratio to its raw baseline):

- append 16 KiB / 1 MiB batches: ``Log.append_as_leader`` (validate header + CRC, assign offsets,
  write, index) vs sequential ``os.write`` of the very same bytes; both end with one fsync.
- recovery: ``Log.open`` after an unclean shutdown (every batch's header and CRC checked, indexes
  rebuilt) vs reading the same files with ``os.read``.
- fetch: ``Log.read`` slices sent with ``os.sendfile`` over a loopback TCP socket vs
  ``os.sendfile`` of the raw file in the same chunk size.

Prints a table (rich) and writes ``bench/results/storage.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

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


def raw_append(path: Path, batch: bytes, count: int) -> float:
    def run() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(count):
                os.write(fd, batch)
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


def append_pair(directory: Path, size: int, batch: bytes, count: int) -> tuple[float, float, Log]:
    """Raw and Samsa appends, interleaved twice; the best of each (the page cache's write-back
    of one run slows whichever runs next, so a single ordered pair is biased)."""
    raw_times, log_times = [], []
    log: Log | None = None
    for attempt in range(2):
        raw_path = directory / f"raw-{size}.bin"
        raw_times.append(raw_append(raw_path, batch, count))
        raw_path.unlink()
        if log is not None:
            log.close()
            shutil.rmtree(log.directory)
        seconds, log = log_append(directory / f"bench-{size}-{attempt}", batch, count)
        log_times.append(seconds)
    assert log is not None
    return min(raw_times), min(log_times), log


def run_cases(directory: Path, mib: int, progress: Progress) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cases = [("16 KiB", 16 * 1024), ("1 MiB", MIB)]
    task = progress.add_task("storage bench", total=len(cases) * 3)
    for label, size in cases:
        batch = make_batch(size)
        count = max(1, mib * MIB // len(batch))
        total = len(batch) * count
        raw_seconds, log_seconds, log = append_pair(directory, size, batch, count)
        rows.append(_row(f"append {label} batches", total, log_seconds, raw_seconds, "os.write"))
        progress.advance(task)
        log_directory = log.directory
        segment_paths = [segment.log_path for segment in log.segments]
        log.close()
        raw_read_seconds = raw_read(segment_paths)
        recovery_seconds = recovery(log_directory)
        rows.append(_row(f"recovery ({label} batches)", total, recovery_seconds,
                         raw_read_seconds, "os.read"))
        progress.advance(task)
        log = Log.open(log_directory, LogConfig(), clock=SYSTEM_CLOCK,
                       had_clean_shutdown=True)
        fetch_seconds = log_fetch(log, MIB)
        raw_fetch_seconds = raw_fetch(segment_paths, MIB)
        rows.append(_row(f"fetch 1 MiB reads ({label} batches)", total, fetch_seconds,
                         raw_fetch_seconds, "os.sendfile"))
        log.close()
        progress.advance(task)
    return rows


def _row(case: str, total: int, seconds: float, raw_seconds: float, baseline: str) -> dict[str, Any]:
    samsa = total / seconds / 1e6
    raw = total / raw_seconds / 1e6
    return {"case": case, "bytes": total, "samsa_mb_s": round(samsa, 1), "baseline": baseline,
            "raw_mb_s": round(raw, 1), "ratio": round(samsa / raw, 3)}


def print_table(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="Samsa storage vs the raw disk (same run, same directory)")
    for column in ("case", "Samsa MB/s", "baseline", "baseline MB/s", "ratio"):
        table.add_column(column, justify="left" if column in ("case", "baseline") else "right")
    for row in rows:
        table.add_row(row["case"], f"{row['samsa_mb_s']:.0f}", row["baseline"],
                      f"{row['raw_mb_s']:.0f}", f"{row['ratio']:.2f}x")
    console.print(table)


def main(directory: Path | None = None, mib: int = 512, json_path: Path | None = None) -> None:
    console = Console()
    with (
        tempfile.TemporaryDirectory(dir=directory, prefix="samsa-bench-") as temp,
        Progress(console=console, transient=True) as progress,
    ):
        rows = run_cases(Path(temp), mib, progress)
    print_table(rows, console)
    target = json_path or RESULTS / "storage.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"bench": "storage", "mib_per_case": mib, "rows": rows}, indent=2))
    console.print(f"results written to {target}")


if __name__ == "__main__":
    main()
