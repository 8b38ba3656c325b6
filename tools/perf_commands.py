"""``samsa perf storage``: the storage benchmark (``bench.storage``) from the CLI."""

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


def run_storage(args: argparse.Namespace) -> int:
    from bench import storage

    storage.main(directory=args.dir, mib=args.mib, json_path=args.json)
    return 0
