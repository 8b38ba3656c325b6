"""``samsa perf storage`` / ``broker`` / ``produce`` / ``consume``: the benchmarks in ``bench``
from the CLI (``perf produce``: ``bench.client_perf``, kafka-producer-perf-test's measurements
for Samsa's client and, with ``--client``, confluent-kafka and kafka-python; ``perf consume``
likewise with ``bench.consumer_perf``). With ``--rounds N`` every comparison runs N
interleaved rounds and reports medians (min–max) and the median of the paired per-round
ratios (``bench.rounds``)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_MISSING = ("samsa perf runs the repository's bench package, which the wheel leaves out: "
                 "run it from a checkout (make install)")


def _bench(name: str) -> Any:
    """``bench.<name>``, or a one-line error where only the wheel is installed."""
    try:
        return importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as error:
        if error.name == "bench":
            raise RuntimeError(BENCH_MISSING) from None
        raise


def register(groups: Any) -> None:
    perf = groups.add_parser("perf", help="benchmarks")
    commands = perf.add_subparsers(dest="command", metavar="COMMAND", required=True)
    storage = commands.add_parser("storage", help="Log.append/read/recovery vs the raw disk")
    storage.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    storage.add_argument("--mib", type=int, default=512, help="MiB written per case")
    _add_rounds(storage, 5)
    storage.add_argument("--json", type=Path, default=None, help="also write the results here")
    storage.set_defaults(handler=run_storage)
    broker = commands.add_parser("broker", help="Samsa vs peer brokers and the machine's limits")
    broker.add_argument("--quick", action="store_true", help="a tenth of the records")
    broker.add_argument("--profile", action="store_true", help="Samsa alone, under py-spy")
    _add_rounds(broker, 5)
    broker.add_argument("--json", type=Path, default=None, help="write the results here")
    broker.set_defaults(handler=run_broker)
    register_produce(commands)
    register_consume(commands)


def _add_rounds(parser: Any, default: int) -> None:
    parser.add_argument("--rounds", type=int, default=default, metavar="N",
                        help=f"interleaved rounds, the order rotated each round; reports the "
                             f"median (min–max) and the paired ratios' median (default {default})")


def register_produce(commands: Any) -> None:
    from tools.client_options import add_client_options

    produce = commands.add_parser(
        "produce", help="producer throughput and latency (like kafka-producer-perf-test)")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=int, required=True, metavar="N")
    produce.add_argument("--record-size", type=int, required=True, metavar="BYTES")
    produce.add_argument("--throughput", type=float, default=-1, metavar="RECORDS_PER_S",
                         help="throttle to this many records/s (-1: as fast as possible)")
    produce.add_argument("--client", default="samsa",
                         choices=("samsa", "confluent-kafka", "kafka-python", "all"),
                         help="which client produces; all: the three, one after the other, "
                              "with samsa's records/s as a ratio to the others")
    _add_rounds(produce, 1)
    add_client_options(produce)
    produce.set_defaults(handler=run_produce)


def run_storage(args: argparse.Namespace) -> int:
    storage = _bench("storage")

    storage.main(directory=args.dir, mib=args.mib, json_path=args.json, rounds_count=args.rounds)
    return 0


def run_broker(args: argparse.Namespace) -> int:
    broker = _bench("broker")

    broker.main(quick=args.quick, profile=args.profile, json_path=args.json,
                rounds_count=args.rounds)
    return 0


def run_produce(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console

    client_perf = _bench("client_perf")

    bootstrap, settings, clients = _clients(args, client_perf.CLIENTS)
    done = client_perf.run(bootstrap, args.topic, clients, num_records=args.num_records,
                           record_size=args.record_size, throughput=args.throughput,
                           settings=settings, rounds_count=args.rounds,
                           console=None if args.json else Console(stderr=True))
    summary = client_perf.summarize(done)
    _print_summary(args, summary, lambda console: client_perf.print_results(summary, console))
    failed = client_perf.failures(done)
    for result in failed:
        print(f"samsa: error: {result.client}: {result.errors} record(s) not delivered: "
              f"{result.first_error}", file=sys.stderr)
    return 1 if failed else 0


def _clients(args: argparse.Namespace,
             every: tuple[str, ...]) -> tuple[str, dict[str, str], list[str]]:
    """The bootstrap servers, the settings every client gets, and which clients run."""
    from tools.client_options import client_config

    settings = client_config(args)
    bootstrap = settings.pop("bootstrap.servers")
    settings.pop("client.id", None)  # each client keeps its own default
    return bootstrap, settings, list(every) if args.client == "all" else [args.client]


def _print_summary(args: argparse.Namespace, summary: dict[str, Any],
                   show: Callable[[Any], None]) -> None:
    """The summary as JSON on stdout with ``--json``, else ``show(console)``'s table."""
    import json
    import sys

    rounds = _bench("rounds")

    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        show(rounds.console())


def register_consume(commands: Any) -> None:
    from tools.client_options import add_client_options

    consume = commands.add_parser(
        "consume", help="consumer throughput (like kafka-consumer-perf-test)")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--messages", type=int, required=True, metavar="N",
                         help="records to read (fewer if the topic ends first)")
    consume.add_argument("--client", default="samsa",
                         choices=("samsa", "confluent-kafka", "kafka-python", "all"),
                         help="which client consumes; all: the three, one after the other, "
                              "with samsa's records/s as a ratio to the others")
    _add_rounds(consume, 1)
    add_client_options(consume)
    consume.set_defaults(handler=run_consume)


def run_consume(args: argparse.Namespace) -> int:
    """``bench.consumer_perf`` from the command line: a table, or JSON with ``--json``."""
    from rich.console import Console

    consumer_perf = _bench("consumer_perf")

    bootstrap, settings, clients = _clients(args, consumer_perf.CLIENTS)
    done = consumer_perf.run(bootstrap, args.topic, clients, messages=args.messages,
                             settings=settings, rounds_count=args.rounds,
                             console=None if args.json else Console(stderr=True))
    summary = consumer_perf.summarize(done)
    _print_summary(args, summary, lambda console: consumer_perf.print_results(summary, console))
    return 0
