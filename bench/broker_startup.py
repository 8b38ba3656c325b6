"""Start-up and idle memory of every broker the broker bench compares (``bench.broker``).

Per round and broker (``bench.rounds``: interleaved, the order rotated each round), a new
broker process on a new, empty data directory:

- ``ready_s``: from the spawn to the broker's ready line (``BrokerProcess.started_s``; Samsa's
  ``Samsa broker started on``, Kafka's ``Kafka Server started``, tansu's ``ready in``,
  noida-db's ``press Ctrl-C``). Apache Kafka's storage is formatted before the clock starts
  (``kafka-storage format``, a separate JVM run once per data directory).
- ``first_produce_s``: from the spawn to the acknowledgement of a first record (``acks=1``) to
  a topic created through the AdminClient after the ready line: what a deployment waits
  before it can take writes.
- ``idle_rss_mib``: the broker's resident memory (``bench.memory``) after ``IDLE_SECONDS`` of
  idling that follow the first produce (a JVM keeps compiling and collecting for a moment
  after its start).

Then the broker is stopped (SIGTERM) and its directory removed. Reported: the median (min–max)
of each figure and Samsa ÷ each other broker, paired per round.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from rich.progress import Progress

from bench import peers, rounds
from bench.broker_clients import QUIET, create_topic
from bench.memory import MIB

IDLE_SECONDS = 1.0
FIRST_PRODUCE_TIMEOUT_S = 120.0
Starter = Callable[[Path], peers.BrokerProcess]


@dataclass(frozen=True)
class StartRound:
    ready_s: float
    first_produce_s: float
    idle_rss_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"ready_s": round(self.ready_s, 3), "first_produce_s": round(self.first_produce_s, 3),
                "idle_rss_mib": round(self.idle_rss_bytes / MIB, 1)}


FIGURES: dict[str, Callable[[StartRound], float]] = {
    "ready_s": lambda done: done.ready_s,
    "first_produce_s": lambda done: done.first_produce_s,
    "idle_rss_mib": lambda done: done.idle_rss_bytes / MIB,
}
COLUMNS = (("ready_s", "spawn → ready, s", ".2f"),
           ("first_produce_s", "spawn → first produce acked, s", ".2f"),
           ("idle_rss_mib", "idle RSS MiB", ",.0f"))


def produce_first(bootstrap: str, topic: str) -> None:
    """Create ``topic`` and send one record; return once it is acknowledged."""
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1,
                         "message.timeout.ms": int(FIRST_PRODUCE_TIMEOUT_S * 1000), **QUIET})
    errors: list[object] = []
    producer.produce(topic, b"x" * 100, partition=0,
                     on_delivery=lambda error, _message: errors.append(error))
    producer.flush(FIRST_PRODUCE_TIMEOUT_S)
    producer.close()
    if errors != [None]:
        raise RuntimeError(f"the first produce failed: {errors or 'no acknowledgement'}")


def start_once(start: Starter, directory: Path) -> StartRound:
    directory.mkdir(parents=True)
    broker = start(directory)
    try:
        ready_at = time.perf_counter()
        produce_first(broker.bootstrap, "first-produce")
        first_produce_s = broker.started_s + time.perf_counter() - ready_at
        time.sleep(IDLE_SECONDS)  # the idle time itself is what is measured after
        return StartRound(broker.started_s, first_produce_s, broker.rss_bytes())
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def starters(venv: peers.PeerVenv | None) -> dict[str, Starter]:
    """How to start each broker on a directory of its own (a peer only with its venv)."""
    found: dict[str, Starter] = {"samsa": lambda directory: peers.start_samsa(directory / "data"),
                                 "kafka": peers.start_kafka}
    if venv is not None:
        found["tansu"] = lambda directory: peers.start_tansu(venv, directory)
        found["noida-db"] = lambda directory: peers.start_noida(venv, directory)
    return found


def run(systems: list[str], venv: peers.PeerVenv | None, work: Path, settings_rounds: int,
        progress: Progress) -> dict[str, Any]:
    """The start-up comparison of ``systems`` (those that started in the main comparison)."""
    known = starters(venv)
    chosen = [name for name in systems if name in known]

    def measure(name: str, round_index: int) -> StartRound:
        return start_once(known[name], work / f"startup-{name}-{round_index}")

    done = rounds.run_rounds(chosen, settings_rounds, measure,
                             may_fail=[name for name in chosen if name != "samsa"],
                             progress=progress, label="start-up: ")
    return {"idle_seconds": IDLE_SECONDS, **rounds.summarize(done, FIGURES),
            "rounds": rounds.rounds_json(done, StartRound.to_json)}
