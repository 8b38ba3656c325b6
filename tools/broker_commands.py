"""``samsa broker start [--config FILE] [--override key=value ...]``: run a broker in the foreground.

A bad configuration value stops start-up with one line naming the key, the value and why
(exit code 1); SIGTERM or SIGINT stops the broker cleanly (exit code 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(groups: Any) -> None:
    broker = groups.add_parser("broker", help="run the broker")
    commands = broker.add_subparsers(dest="command", metavar="COMMAND", required=True)
    start = commands.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", type=Path, default=None, metavar="FILE",
                       help="a server.properties file (Kafka's format)")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key, over the file (repeatable)")
    start.set_defaults(handler=run_start)


def run_start(args: argparse.Namespace) -> int:
    from broker.config import BrokerConfig
    from broker.daemon import run

    config = BrokerConfig.load(args.config, args.override)
    return run(config)
