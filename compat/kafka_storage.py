"""A stand-in for Kafka's ``bin/kafka-storage.sh format``, for kafka-python's broker fixture.

kafka-python's ``KafkaFixture`` (KRaft mode) formats its broker's storage before starting it:
``kafka-storage.sh format --standalone -t CLUSTER_ID -c kafka.properties
[--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]']``. Kafka writes the SCRAM
credentials into the bootstrap metadata; a Samsa broker formats its own log directories at first
start and takes SCRAM users through AlterUserScramCredentials only. So this stand-in checks the
arguments as Kafka does and records the credentials in ``SCRAM_FILE`` next to the properties
file, as JSON (``[{"mechanism", "name", "password", "iterations"}]``); compat's stand-in for the
broker process (``compat/kafka_python/service.py``) creates them right after the broker starts.
Exit 0 on success, 1 on a bad ``--add-scram`` (``Error while ...``), 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

SCRAM_FILE = "samsa-bootstrap-scram.json"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096  # what kafka-storage.sh uses when the entry names none
# MECHANISM=[key=value,...]; values may be double-quoted, as Kafka's ScramParser allows.
_ENTRY = re.compile(r"^\s*([A-Z0-9-]+)\s*=\s*\[(.*)\]\s*$")
_OPTION = re.compile(r'\s*(\w+)\s*=\s*("(?:[^"]*)"|[^,]*)\s*(?:,|$)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-storage.sh")
    commands = parser.add_subparsers(dest="command", required=True)
    format_command = commands.add_parser("format")
    format_command.add_argument("-c", "--config", type=Path, required=True)
    format_command.add_argument("-t", "--cluster-id", required=True)
    format_command.add_argument("--standalone", "-s", action="store_true")
    format_command.add_argument("--ignore-formatted", "-g", action="store_true")
    format_command.add_argument("--add-scram", "-S", action="append", default=[])
    return parser


def parse_scram(entry: str) -> dict[str, object]:
    """One ``--add-scram`` value as a credential; ValueError says what is wrong."""
    match = _ENTRY.match(entry)
    if not match or match.group(1) not in SCRAM_MECHANISMS:
        raise ValueError(f"expected {'|'.join(SCRAM_MECHANISMS)}=[name=...,password=...], "
                         f"got {entry!r}")
    options = {key: value.strip('"') for key, value in _OPTION.findall(match.group(2))}
    for required in ("name", "password"):
        if not options.get(required):
            raise ValueError(f"{entry!r} has no {required}")
    return {"mechanism": match.group(1), "name": options["name"],
            "password": options["password"],
            "iterations": int(options.get("iterations", DEFAULT_ITERATIONS))}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        credentials = [parse_scram(entry) for entry in args.add_scram]
    except ValueError as error:
        print(f"Error while formatting storage: {error}", file=sys.stderr)
        return 1
    if not args.config.is_file():
        print(f"Error while formatting storage: {args.config} does not exist", file=sys.stderr)
        return 1
    (args.config.parent / SCRAM_FILE).write_text(json.dumps(credentials) + "\n")
    print(f"Formatted (Samsa stand-in): {len(credentials)} SCRAM credential(s) recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
