"""``samsa perf storage`` / ``samsa perf broker`` / ``samsa perf produce``: the benchmarks in
``bench`` from the CLI (``perf produce``: ``bench.client_perf``, kafka-producer-perf-test's
measurements for Samsa's client and, with ``--client``, confluent-kafka and kafka-python)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(groups: Any) -> None:
    perf = groups.add_parser("perf", help="benchmarks")
    commands = perf.add_subparsers(dest="command", metavar="COMMAND", required=True)
    storage = commands.add_parser("storage", help="Log.append/read/recovery vs the raw disk")
    storage.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    storage.add_argument("--mib", type=int, default=512, help="MiB written per case")
    storage.add_argument("--json", type=Path, default=None, help="also write the results here")
    storage.set_defaults(handler=run_storage)
    broker = commands.add_parser("broker", help="Samsa vs peer brokers and the machine's limits")
    broker.add_argument("--quick", action="store_true", help="a tenth of the records")
    broker.add_argument("--profile", action="store_true", help="Samsa alone, under py-spy")
    broker.add_argument("--json", type=Path, default=None, help="write the results here")
    broker.set_defaults(handler=run_broker)
    register_produce(commands)
    register_consume(commands)


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
    produce.add_argument("--rounds", type=int, default=1,
                         help="run each client this many times, interleaved; keep the best")
    add_client_options(produce)
    produce.set_defaults(handler=run_produce)


def run_storage(args: argparse.Namespace) -> int:
    from bench import storage

    storage.main(directory=args.dir, mib=args.mib, json_path=args.json)
    return 0


def run_broker(args: argparse.Namespace) -> int:
    from bench import broker

    broker.main(quick=args.quick, profile=args.profile, json_path=args.json)
    return 0


def run_produce(args: argparse.Namespace) -> int:
    import json
    import sys

    from rich.console import Console

    from bench import client_perf
    from tools.client_options import client_config

    settings = client_config(args)
    bootstrap = settings.pop("bootstrap.servers")
    settings.pop("client.id", None)  # each client keeps its own default
    clients = list(client_perf.CLIENTS) if args.client == "all" else [args.client]
    console = Console(stderr=True)
    history: dict[str, list[client_perf.ProduceResult]] = {}
    results = client_perf.run(bootstrap, args.topic, clients, num_records=args.num_records,
                              record_size=args.record_size, throughput=args.throughput,
                              settings=settings, rounds=args.rounds,
                              console=None if args.json else console, history=history)
    if args.json:
        json.dump({"results": [r.row() for r in results],
                   "ratios": client_perf.ratios(results),
                   "paired_ratios_median": client_perf.paired_ratios(history)},
                  sys.stdout, indent=2)
        print()
    else:
        client_perf.print_results(results, Console(width=None if sys.stdout.isatty() else 150),
                                  history=history)
    failed = [r for r in results if r.errors]
    for result in failed:
        print(f"samsa: error: {result.client}: {result.errors} record(s) not delivered: "
              f"{result.first_error}", file=sys.stderr)
    return 1 if failed else 0


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
    consume.add_argument("--rounds", type=int, default=1,
                         help="run each client this many times, interleaved; keep the best")
    add_client_options(consume)
    consume.set_defaults(handler=run_consume)


def run_consume(args: argparse.Namespace) -> int:
    """``bench.consumer_perf`` from the command line: a table, or JSON with ``--json``."""
    import json
    import sys

    from rich.console import Console

    from bench import consumer_perf
    from tools.client_options import client_config

    settings = client_config(args)
    bootstrap = settings.pop("bootstrap.servers")
    settings.pop("client.id", None)  # each client keeps its own default
    clients = list(consumer_perf.CLIENTS) if args.client == "all" else [args.client]
    results = consumer_perf.run(bootstrap, args.topic, clients, messages=args.messages,
                                settings=settings, rounds=args.rounds,
                                console=None if args.json else Console(stderr=True))
    if args.json:
        json.dump({"results": [r.row() for r in results],
                   "ratios": consumer_perf.ratios(results)}, sys.stdout, indent=2)
        print()
    else:
        consumer_perf.print_results(results, Console(width=None if sys.stdout.isatty() else 150))
    return 0
