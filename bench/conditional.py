"""Conditional appends (SamsaConditionalProduce) beside plain produce: ``python -m
bench.conditional``.

One Samsa broker, one writer (Samsa's ``Producer``, acks=all, idempotent: the defaults), the
same 100-byte records in every mode, each mode on a fresh one-partition topic, after one
warm-up record:

- ``conditional, one at a time``: each record sent with ``expected_offset`` = the offset after
  the previous one and its acknowledgement awaited before the next — the event store's
  read-modify-append pattern, one round trip per append;
- ``conditional on the key, one at a time``: each record keyed by one of 100 entities in turn
  and sent with ``expected_key_offset`` = the offset of that entity's previous record (-1 for
  its first), awaited before the next — the per-entity stream of an event store, each append
  looked up through the partition's key index;
- ``conditional, pipelined``: the records sent back to back with expected offsets N, N+1, ...
  (each alone in its batch, up to 5 requests in flight), then all acknowledgements awaited;
- ``plain, one at a time``: ``send`` then wait, acks=all — the same round trips, no
  condition; with ``linger.ms=0``, else each record would first wait out the default 5 ms
  linger (a conditional record's batch is full at once, so it never lingers);
- ``plain, batched``: ``send`` every record, then ``flush`` — what batching buys.

Rounds are interleaved, the order rotated each round (``bench.rounds``). Reported: each mode's
records/s, median (min–max) over the rounds, and the median (min–max) of the paired per-round
ratios conditional ÷ plain (one at a time against one at a time, pipelined against batched).
Writes ``bench/results/conditional.json`` with every round's figures and the environment.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from bench import rounds

RESULTS = Path(__file__).parent / "results"
ONE_CONDITIONAL = "conditional, one at a time"
PIPELINED = "conditional, pipelined"
ONE_KEYED = "conditional on the key, one at a time"
ONE_PLAIN = "plain, one at a time"
BATCHED = "plain, batched"
MODES = (ONE_CONDITIONAL, ONE_KEYED, PIPELINED, ONE_PLAIN, BATCHED)
KEYS = 100  # the keyed mode cycles through this many keys
# (numerator, denominator, what the ratio says)
PAIRS = ((ONE_CONDITIONAL, ONE_PLAIN, "the cost of the condition per round trip"),
         (ONE_KEYED, ONE_PLAIN, "the cost of the key condition (a key index lookup)"),
         (PIPELINED, BATCHED, "a record per batch against batching"),
         (PIPELINED, ONE_PLAIN, "pipelining conditional appends"))
VALUE = b"x" * 100


@dataclass(frozen=True)
class Measured:
    mode: str
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    def row(self) -> dict[str, Any]:
        return {"mode": self.mode, "records": self.records, "seconds": round(self.seconds, 3),
                "records_per_s": round(self.records_per_s)}


def one_conditional(producer: Any, topic: str, count: int, start: int) -> None:
    expected = start
    for _ in range(count):
        expected = producer.send(topic, VALUE, partition=0,
                                 expected_offset=expected).result(60).offset + 1


def one_keyed(producer: Any, topic: str, count: int, start: int) -> None:
    last: dict[bytes, int] = {}
    for number in range(count):
        key = b"entity-%d" % (number % KEYS)
        last[key] = producer.send(topic, VALUE, key=key, partition=0,
                                  expected_key_offset=last.get(key, -1)).result(60).offset


def pipelined(producer: Any, topic: str, count: int, start: int) -> None:
    futures = [producer.send(topic, VALUE, partition=0, expected_offset=start + index)
               for index in range(count)]
    for index, future in enumerate(futures):
        assert future.result(60).offset == start + index


def one_plain(producer: Any, topic: str, count: int, start: int) -> None:
    for _ in range(count):
        producer.send(topic, VALUE, partition=0).result(60)


def batched(producer: Any, topic: str, count: int, start: int) -> None:
    futures = [producer.send(topic, VALUE, partition=0) for _ in range(count)]
    producer.flush()
    for future in futures:
        future.result(60)


WRITERS: dict[str, Callable[[Any, str, int, int], None]] = {
    ONE_CONDITIONAL: one_conditional, ONE_KEYED: one_keyed, PIPELINED: pipelined,
    ONE_PLAIN: one_plain, BATCHED: batched}


def measure(bootstrap: str, mode: str, count: int, topic: str) -> Measured:
    from samsa.admin import AdminClient, NewTopic
    from samsa.producer import Producer

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    settings = {"linger.ms": 0} if mode == ONE_PLAIN else {}
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings}) as producer:
        producer.send(topic, VALUE, partition=0, expected_offset=0).result(60)  # warm-up
        began = time.perf_counter()
        WRITERS[mode](producer, topic, count, 1)
        seconds = time.perf_counter() - began
    return Measured(mode, count, seconds)


def summary(done: rounds.Rounds[Measured]) -> dict[str, Any]:
    def figure(result: Measured) -> float:
        return result.records_per_s

    return {
        "records_per_s": {mode: rounds.spread_json(done.spread(mode, figure), 1)
                          for mode in done.systems},
        "ratios": [{"mode": mine, "against": theirs, "meaning": meaning,
                    "ratio": rounds.spread_json(done.ratio(mine, theirs, figure))}
                   for mine, theirs, meaning in PAIRS]}


def table(result: dict[str, Any], title: str, caption: str) -> Table:
    output = Table(title=title, caption=caption)
    output.add_column("mode")
    output.add_column("records/s", justify="right")
    for mode, spread in result["records_per_s"].items():
        output.add_row(mode, rounds.cell(spread))
    for pair in result["ratios"]:
        output.add_row(f"{pair['mode']} ÷ {pair['against']} (paired): {pair['meaning']}",
                       rounds.ratio_cell(pair["ratio"]))
    return output


def main(*, count: int = 2000, rounds_count: int = rounds.DEFAULT_ROUNDS,
         json_path: Path | None = None) -> None:
    from bench import peers

    console = rounds.console()
    environment = rounds.environment()
    topics = (f"conditional-bench-{n}" for n in itertools.count())
    with peers.temporary_samsa("samsa-conditional-bench-") as broker:
        done = rounds.run_rounds(
            MODES, rounds_count, lambda mode, _: measure(broker.bootstrap, mode, count,
                                                         next(topics)))
    environment = rounds.finish(environment)
    result = summary(done)
    console.print(table(result, caption=rounds.caption(environment), title=(
        f"{count:,} × 100 B records, one writer, acks=all, idempotent: median (min–max) of "
        f"{rounds_count} interleaved rounds")))
    document = {"bench": "conditional", "environment": environment, "records": count,
                "record_size": len(VALUE), "rounds": rounds_count, **result,
                "by_round": rounds.rounds_json(done, Measured.row)}
    rounds.write_results(document, json_path or RESULTS / "conditional.json", console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.conditional",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000, help="records per mode and round")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(count=arguments.records, rounds_count=arguments.rounds, json_path=arguments.json)
