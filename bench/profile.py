"""``python -m bench.broker --profile``: where Samsa's produce and fetch paths spend CPU.

Samsa alone runs the broker bench's workloads while ``py-spy record`` (installed in the peers'
venv, ``bench.peers``) samples it, one recording per phase: small-record produce, small-record
fetch, and 1 MiB-batch ingest. Only samples of a running thread count (py-spy leaves idle
threads out), so the shares are shares of the broker's CPU time, not of wall time.

Each recording is kept as py-spy's raw collapsed stacks (``bench/results/profile-PHASE.txt``:
``frame;frame;... samples``, frames as ``function (file)``; ``--native`` adds the C frames
of uvloop, CPython and the extensions); the summary lists the functions
with the most samples on top of the stack (self) and anywhere in it (inclusive).
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import peers
from bench.broker_clients import (
    SMALL_CONSUMER,
    SMALL_PRODUCER,
    Settings,
    Workload,
    consume,
    create_topic,
    produce,
)
from bench.broker_limits import raw_ingest
from bench.storage import MIB, RESULTS, make_batch

SAMPLE_RATE = 250
TOP = 12


def run(settings: Settings, work: Path, console: Console) -> dict[str, Any]:
    venv = peers.ensure_peer_venv(("py-spy",))
    if "py-spy" not in venv.installed:
        raise peers.Unavailable(f"py-spy could not be installed: {venv.failures.get('py-spy')}")
    broker = peers.start_samsa(work / "samsa-data")
    # 4× the records: the broker needs only ~0.1 s of CPU for 500,000 of them.
    workload = Workload(settings.count * 4, 100, SMALL_PRODUCER, SMALL_CONSUMER)
    bootstrap = broker.bootstrap
    phases: dict[str, Any] = {}
    try:
        create_topic(bootstrap, "bench-small")
        create_topic(bootstrap, "bench-ingest")
        batch = make_batch(MIB)
        steps = [
            ("produce", lambda: produce(bootstrap, "bench-small", workload).close()),
            ("fetch", lambda: consume(bootstrap, "bench-small", workload).close()),
            ("ingest-1mib", lambda: raw_ingest(bootstrap, "bench-ingest", batch,
                                               settings.ingest_batches)),
        ]
        for name, action in steps:
            console.print(f"profiling {name} …")
            phases[name] = record(venv, broker.pid, name, action)
    finally:
        broker.stop()
    return {"bench": "broker-profile", "count": workload.count, "phases": phases}


def record(venv: peers.PeerVenv, pid: int, name: str, action: Any) -> dict[str, Any]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    output = RESULTS / f"profile-{name}.txt"
    spy = subprocess.Popen(
        [str(venv.executable("py-spy")), "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE),
         "--format", "raw", "--nolineno", "--native", "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        action()
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        _, errors = spy.communicate(timeout=60)
    if not output.exists():
        raise RuntimeError(f"py-spy wrote nothing: {errors.strip()[-300:]}")
    return summarise(output.read_text())


def summarise(collapsed: str) -> dict[str, Any]:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_short(frame) for frame in stack.split(";")]
        frames = [frame for frame in frames if not frame.startswith("process ") and
                  not frame.startswith("thread ")]
        total += count
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    return {"samples": total,
            "self": [_share(frame, count, total) for frame, count in own.most_common(TOP)],
            "inclusive": [_share(frame, count, total)
                          for frame, count in inclusive.most_common(TOP + 8)]}


def _short(frame: str) -> str:
    """``function (path/to/file.py)`` with the path cut to the package part."""
    function, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{function} ({where})" if where else function


def _share(frame: str, count: int, total: int) -> dict[str, Any]:
    return {"frame": frame, "samples": count, "percent": round(100 * count / max(total, 1), 1)}


def print_tables(result: dict[str, Any], console: Console) -> None:
    for name, phase in result["phases"].items():
        for kind in ("self", "inclusive"):
            table = Table(title=f"Samsa {name} ({result['count']:,} records): top {kind} "
                                f"({phase['samples']} samples at {SAMPLE_RATE} Hz, CPU only)")
            table.add_column("function (file)")
            table.add_column("samples", justify="right")
            table.add_column("% of broker CPU", justify="right")
            for entry in phase[kind]:
                table.add_row(entry["frame"], str(entry["samples"]), f"{entry['percent']:.1f}")
            console.print(table)
