"""``samsa configs describe|alter``: kafka-configs.sh for topics and brokers.

- ``describe --topic T | --broker ID | --broker-defaults [--all]``: the configs set on the
  resource (sources ``DYNAMIC_*``), or with ``--all`` every config with its source.
- ``alter --topic T | --broker ID | --broker-defaults --set k=v ... --delete k ...``
  (IncrementalAlterConfigs: the configs not named stay as they are).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from samsa._admin_types import ConfigResource
from tools.admin_support import open_admin
from tools.client_options import add_client_options, emit
from tools.topics_commands import add_alter_options, alter_configs

if TYPE_CHECKING:
    from samsa.admin import ConfigEntry

__all__ = ["config_rows", "register"]


def register(groups: Any) -> None:
    configs = groups.add_parser("configs", help="describe and alter topic and broker configs")
    commands = configs.add_subparsers(dest="command", metavar="COMMAND", required=True)
    describe = commands.add_parser("describe", help="the configs of a topic or broker")
    _add_resource_options(describe)
    describe.add_argument("--all", action="store_true",
                          help="every config, defaults included (default: those set)")
    describe.set_defaults(handler=run_describe)
    alter = commands.add_parser("alter", help="set or delete configs of a topic or broker")
    _add_resource_options(alter)
    add_alter_options(alter)
    alter.set_defaults(handler=run_alter)
    for parser in (describe, alter):
        add_client_options(parser)


def _add_resource_options(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="TOPIC")
    which.add_argument("--broker", metavar="ID", type=int, help="a broker's node id")
    which.add_argument("--broker-defaults", action="store_true",
                       help="the cluster-wide dynamic broker configs")


def _resource(args: argparse.Namespace) -> ConfigResource:
    if args.topic is not None:
        return ConfigResource("topic", args.topic)
    return ConfigResource("broker", "" if args.broker_defaults else str(args.broker))


def config_rows(entries: dict[str, ConfigEntry], *, everything: bool) -> list[dict[str, Any]]:
    """Rows of ``entries`` sorted by name: only those set dynamically unless ``everything``."""
    return [{"name": e.name, "value": "(sensitive)" if e.sensitive else e.value,
             "source": e.source, "read_only": e.read_only, "is_default": e.is_default,
             "sensitive": e.sensitive}
            for e in sorted(entries.values(), key=lambda e: e.name)
            if everything or e.source.startswith("DYNAMIC_")]


def run_describe(args: argparse.Namespace) -> int:
    resource = _resource(args)
    with open_admin(args) as admin:
        entries = admin.describe_configs([resource])[resource]
    rows = config_rows(entries, everything=args.all)
    document = {"resource": {"type": resource.type, "name": resource.name}, "configs": rows}
    emit(args, rows, ["name", "value", "source"], document=document)
    return 0


def run_alter(args: argparse.Namespace) -> int:
    return alter_configs(args, _resource(args))
