"""``samsa perf storage`` / ``samsa perf broker``: the benchmarks in ``bench`` from the CLI."""

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


def run_storage(args: argparse.Namespace) -> int:
    from bench import storage

    storage.main(directory=args.dir, mib=args.mib, json_path=args.json)
    return 0


def run_broker(args: argparse.Namespace) -> int:
    from bench import broker

    broker.main(quick=args.quick, profile=args.profile, json_path=args.json)
    return 0
