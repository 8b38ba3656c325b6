"""``samsa storage``: Kafka's ``kafka-storage.sh`` for a node's log directories.

- ``samsa storage format -t CLUSTER_ID -c CONFIG [--ignore-formatted]``: write
  ``meta.properties`` into each log directory of a KRaft node (optional in Samsa: a node
  without one learns the cluster id from the quorum).
- ``samsa storage random-uuid``: a new cluster id.
- ``samsa storage info -c CONFIG [--json]``: what the log directories hold; exit code 1 when
  there is a problem, as Kafka's.

``--override key=value`` applies over the config file, as for ``samsa broker start``.
The work is done by ``broker.storage_format``; a refusal is one line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(groups: Any) -> None:
    storage = groups.add_parser("storage", help="format and inspect a node's log directories")
    commands = storage.add_subparsers(dest="command", metavar="COMMAND", required=True)
    format_parser = commands.add_parser("format", help="format the log directories of this node")
    _config_options(format_parser)
    format_parser.add_argument("-t", "--cluster-id", required=True, help="the cluster id to use")
    format_parser.add_argument(
        "-g", "--ignore-formatted", action="store_true",
        help="skip directories that are already formatted rather than failing")
    format_parser.set_defaults(handler=run_format)
    random = commands.add_parser("random-uuid", help="print a random UUID (a new cluster id)")
    random.set_defaults(handler=run_random_uuid)
    info = commands.add_parser("info", help="what the log directories of this node hold")
    _config_options(info)
    info.add_argument("--json", action="store_true", help="print JSON for programs")
    info.set_defaults(handler=run_info)


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", type=Path, required=True, metavar="FILE",
                        help="the node's server.properties (Kafka's format)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a config key, over the file (repeatable)")


def run_format(args: argparse.Namespace) -> int:
    from broker.config import BrokerConfig
    from broker.storage_format import format_storage

    config = BrokerConfig.load(args.config, args.override)
    for line in format_storage(config, args.cluster_id, ignore_formatted=args.ignore_formatted):
        print(line)
    return 0


def run_random_uuid(args: argparse.Namespace) -> int:
    from broker.meta_properties import random_uuid

    print(random_uuid())
    return 0


def run_info(args: argparse.Namespace) -> int:
    from broker.config import BrokerConfig
    from broker.storage_format import describe_storage

    info = describe_storage(BrokerConfig.load(args.config, args.override))
    if args.json:
        print(json.dumps(info.to_document(), indent=2))
    else:
        print("\n".join(info.to_lines()))
    return info.exit_code
