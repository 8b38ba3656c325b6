"""The cost of ``samsa.log.verify.on.startup`` (``storage.verification``): seconds per GB of
log to check every batch's CRC-32C and header order, for a few batch sizes, page cache warm
(the usual case right after a process crash) — what one start-up after an unclean shutdown adds.

    python -m bench.verify_startup [--megabytes 256]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.verification import verify_segments


def build(directory: Path, megabytes: int, batch_bytes: int) -> Log:
    config = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1,
                       message_timestamp_after_max_ms=2**62)
    clock = ManualClock()
    log = Log.open(directory, config, clock=clock)
    value = bytes(range(256)) * (1000 // 256 + 1)
    per_batch = max(1, batch_bytes // 1024)
    records = [Record(offset=i, timestamp=clock.now_ms, key=None, value=value[:1000])
               for i in range(per_batch)]
    batch = encode_batch(records, base_offset=0)
    for _ in range(megabytes * 1024 * 1024 // len(batch)):
        log.append_as_leader(batch)
    log.flush()
    return log


def measure(megabytes: int, batch_bytes: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as root:
        log = build(Path(root) / "t-0", megabytes, batch_bytes)
        size = sum(segment.size for segment in log.segments)
        verify_segments(log.segments)  # warm the page cache, as after a crash
        started = time.perf_counter()
        result = verify_segments(log.segments)
        elapsed = time.perf_counter() - started
        assert result.damage is None
        log.close()
        return elapsed / (size / 1e9), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256)
    arguments = parser.parse_args()
    print(f"{'batch':>8} {'log MB':>8} {'s per GB':>9}")
    for batch_bytes in (1024, 16 * 1024, 256 * 1024):
        seconds_per_gb, size = measure(arguments.megabytes, batch_bytes)
        print(f"{batch_bytes // 1024:>6}Ki {size / 1e6:>8.0f} {seconds_per_gb:>9.2f}")


if __name__ == "__main__":
    main()
