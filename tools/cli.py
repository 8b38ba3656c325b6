"""The ``samsa`` command: one CLI with subcommand groups (``samsa log dump``, ``samsa perf ...``).

Each group lives in its own module exposing ``register(subparsers)``; handlers return an exit
code: 0 ok, 1 error (what failed and why, in one line), 2 usage (argparse's own), 3 an offset
conflict (`samsa produce --expect-offset`: a conditional append's condition did not hold).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tools import (
    acls_commands,
    broker_commands,
    cluster_commands,
    configs_commands,
    consume_commands,
    groups_commands,
    log_commands,
    perf_commands,
    produce_commands,
    share_groups_commands,
    storage_commands,
    topics_commands,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible log broker")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    broker_commands.register(groups)
    log_commands.register(groups)
    perf_commands.register(groups)
    topics_commands.register(groups)
    configs_commands.register(groups)
    groups_commands.register(groups)
    share_groups_commands.register(groups)
    cluster_commands.register(groups)
    consume_commands.register(groups)
    produce_commands.register(groups)
    acls_commands.register(groups)
    storage_commands.register(groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the one place a failure becomes a one-line message
        if args.debug:
            raise
        print(f"samsa: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
