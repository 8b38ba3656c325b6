"""A stand-in for Kafka's ``bin/kafka-acls.sh``, for peer suites that shell out to it.

librdkafka's tests 0109, 0115 and 0119 call ``$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server B
--add --deny-principal 'User:*' --operation All --deny-host '*' --topic T`` (and ``--remove
--force ...``) to deny themselves a topic. This harness does not install Kafka's Java tools, so
``compat.kafka_home`` installs a ``bin/kafka-acls.sh`` that runs this module, which
takes kafka-acls.sh's options (``tools.acls_commands.add_acl_options``) and runs them through
the same code as ``samsa acls``. Exit 0 on success, 1 on error (``Error while executing ACL
command: ...``, as the original prints), 2 for bad options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.acls_commands import add_acl_options, run_acls


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-acls.sh")
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--command-config", type=Path)
    add_acl_options(parser)
    parser.set_defaults(client_settings=[], json=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run_acls(args)
    except Exception as error:  # what kafka-acls.sh does: one line, exit 1
        print(f"Error while executing ACL command: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
